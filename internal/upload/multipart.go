package upload

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// createMultipart claims the key in progress, creates the S3 multipart
// upload, and records the answer. Creating the S3 upload is the one step
// of a create that is not pure CPU, so here, and only here, the claim is
// taken with a lease first: a concurrent request with the key gets
// ErrInProgress meanwhile, and a function that dies mid-way leaves a lease
// that runs out, so the next retry takes the claim over (the orphaned S3
// upload is aborted by the bucket's lifecycle rule).
//
// The claim joins the tenant's group of multipart uploads, and a fresh one
// is admitted only under Config.MaxPendingMultipart (see admitMultipart):
// after the claim, so that a replay is answered from its record, never
// refused and at no extra cost; before S3, so that a refused create made
// nothing.
func (s *Service) createMultipart(ctx context.Context, claim recordstore.Record, pending api.Upload) (Result, error) {
	claim.Group = multipartGroup(claim.Tenant)
	res, err := s.store.ClaimRecord(ctx, claim)
	if err != nil {
		return Result{}, s.claimError(ctx, err)
	}
	if res.Replayed {
		return s.replay(ctx, res.Record)
	}
	if err := s.admitMultipart(ctx, claim); err != nil {
		return Result{}, err
	}
	log := s.opts.Logger.With("upload_id", claim.ClaimID)
	out, err := s.objects.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(pending.StorageKey), ContentType: aws.String(pending.ContentType),
		// Every part then must carry its SHA-256, and Complete checks them.
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		s.release(ctx, claim)
		return Result{}, fmt.Errorf("create multipart upload %s: %w", claim.ClaimID, recordstore.Classify(err))
	}
	s3UploadID := aws.ToString(out.UploadId)
	body, err := encode(pending)
	if err != nil {
		return Result{}, err
	}
	_, err = s.store.Update(ctx, claim.ID, claim.ClaimID, recordstore.Update{
		State:    recordstore.StatePending,
		Response: &idempotency.Response{Body: body},
		Data:     uploadrecord.Fields{S3UploadID: s3UploadID},
	})
	if errors.Is(err, idempotency.ErrNotFound) {
		// Our lease ran out and another request holds the key: this S3
		// upload is nobody's, so abort it now; the client retries.
		s.abortS3(ctx, pending.StorageKey, s3UploadID)
		log.WarnContext(ctx, "multipart create outlived its lease; another request holds the key")
		return Result{}, fmt.Errorf("create %s: %w", claim.ClaimID, &idempotency.InProgressError{RetryAfter: time.Second})
	}
	if err != nil {
		// The answer may have been recorded (a timeout after DynamoDB
		// wrote it), so neither the claim nor the S3 upload is undone: if
		// it was not, the lease runs out, the next retry takes the claim
		// over, and the bucket's lifecycle rule aborts this S3 upload.
		return Result{}, fmt.Errorf("create %s: %w", claim.ClaimID, err)
	}
	log.InfoContext(ctx, "claimed", "multipart", true)
	return Result{UploadID: claim.ClaimID, Body: body, Effect: EffectCreated}, nil
}

// release frees an in-progress claim whose work failed, so that a retry can
// claim the key at once. A failure here only delays that retry until the
// lease runs out.
func (s *Service) release(ctx context.Context, claim recordstore.Record) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := s.store.Release(ctx, claim.ID, claim.ClaimID); err != nil {
		s.opts.Logger.WarnContext(ctx, "release failed; the lease will run out", "upload_id", claim.ClaimID, "error", err)
	}
}

func (s *Service) abortS3(ctx context.Context, key, s3UploadID string) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, err := s.objects.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), UploadId: aws.String(s3UploadID)})
	if err != nil && !isNoSuchUpload(err) {
		s.opts.Logger.WarnContext(ctx, "abort of an orphaned multipart upload failed; the lifecycle rule will", "key", key, "error", err)
	}
}

// cleanupContext is for undoing work after a failure that may have been
// ctx's own deadline: detached from ctx's cancellation, and short, to fit
// in what the caller kept back from the invocation's deadline.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 300*time.Millisecond)
}

// SignParts presigns a PUT for each listed part of a pending multipart
// upload. Each URL signs the part's exact length and SHA-256, so S3 itself
// refuses other bytes. Signing keeps an upload that makes progress alive:
// once less than half of its retention window remains, it restarts.
// Errors: ErrNotFound, ErrNotPending, *api.RequestError, the store's.
func (s *Service) SignParts(ctx context.Context, tenant, uploadID string, req api.SignPartsRequest) (Result, error) {
	rec, u, err := s.pendingMultipart(ctx, tenant, uploadID)
	if err != nil {
		return Result{}, err
	}
	for _, p := range req.Parts {
		if p.PartNumber < 1 || p.PartNumber > u.Multipart.PartCount {
			return Result{}, invalid("parts", "partNumber %d is outside 1..%d", p.PartNumber, u.Multipart.PartCount)
		}
	}
	if rec.ExpiresAt.Sub(s.store.Now()) < s.store.TTL()/2 {
		renewed, err := s.store.Update(ctx, rec.ID, rec.ClaimID, recordstore.Update{
			State: recordstore.StatePending, From: recordstore.StatePending, RestartExpiry: true,
		})
		switch {
		case errors.Is(err, idempotency.ErrAlreadyCompleted) || errors.Is(err, recordstore.ErrAborted) || errors.Is(err, recordstore.ErrMismatch):
			// Completed, aborted, or an abort began since the read.
			return Result{}, ErrNotPending
		case errors.Is(err, idempotency.ErrNotFound):
			return Result{}, ErrNotFound
		case err != nil:
			return Result{}, fmt.Errorf("sign parts of %s: %w", uploadID, err)
		}
		rec.ExpiresAt = renewed.ExpiresAt
	}
	expires := s.urlLifetime(rec.ExpiresAt)
	out := api.SignedParts{Parts: make([]api.SignedPart, 0, len(req.Parts))}
	for _, p := range req.Parts {
		sum, err := hex.DecodeString(p.SHA256)
		if err != nil || len(sum) != 32 {
			return Result{}, invalid("parts", "parts[].sha256 must be 64 hex characters")
		}
		length := api.PartLength(u.Bytes, u.Multipart.PartSize, p.PartNumber)
		signed, err := s.presigner.PresignUploadPart(ctx, &PresignInput{
			Key: u.StorageKey, UploadID: rec.S3UploadID, PartNumber: int32(p.PartNumber), ContentLength: length,
			ChecksumSHA256: base64.StdEncoding.EncodeToString(sum), Expires: expires,
		})
		if err != nil {
			return Result{}, fmt.Errorf("sign part %d of %s: %w", p.PartNumber, uploadID, err)
		}
		put, err := putInstructions(signed)
		if err != nil {
			return Result{}, fmt.Errorf("sign part %d of %s: %w", p.PartNumber, uploadID, err)
		}
		out.Parts = append(out.Parts, api.SignedPart{PartNumber: p.PartNumber, PutInstructions: *put})
	}
	body, err := encode(out)
	if err != nil {
		return Result{}, err
	}
	return Result{UploadID: uploadID, Body: body, Effect: EffectServed}, nil
}

// ListParts returns the parts S3 holds of a pending multipart upload, every
// page of them, for a client that resumes. Errors: ErrNotFound,
// ErrNotPending, *api.RequestError, the store's.
func (s *Service) ListParts(ctx context.Context, tenant, uploadID string) (Result, error) {
	rec, _, err := s.pendingMultipart(ctx, tenant, uploadID)
	if err != nil {
		return Result{}, err
	}
	parts, err := s.storedParts(ctx, rec)
	if isNoSuchUpload(err) {
		// Completed or aborted behind the record's back: settle it.
		if _, err := s.settleGone(ctx, rec, false); err != nil {
			return Result{}, err
		}
		return Result{}, ErrNotPending
	}
	if err != nil {
		return Result{}, fmt.Errorf("list parts of %s: %w", uploadID, recordstore.Classify(err))
	}
	list := api.PartList{Parts: make([]api.StoredPart, 0, len(parts))}
	for _, p := range parts {
		list.Parts = append(list.Parts, api.StoredPart{
			PartNumber: int(aws.ToInt32(p.PartNumber)), Size: aws.ToInt64(p.Size),
			SHA256: hexChecksum(aws.ToString(p.ChecksumSHA256)), ETag: unquoteETag(aws.ToString(p.ETag)),
		})
	}
	body, err := encode(list)
	if err != nil {
		return Result{}, err
	}
	return Result{UploadID: uploadID, Body: body, Effect: EffectServed}, nil
}

// settleGone decides what became of a multipart upload that S3 no longer
// has: completed if the object is there (recorded now, as finalize would).
// Without an object it is aborted only when that cannot be a Complete
// still at work: S3 drops the upload when a Complete starts and shows the
// object only when it ends, so a younger upload without either is in
// progress (ErrInProgress: retry), unless the caller is aborting it (abort), or it is old enough for
// the bucket's lifecycle rule to have aborted it.
func (s *Service) settleGone(ctx context.Context, rec uploadrecord.Stored, abort bool) (uploadrecord.Stored, error) {
	head, err := s.headObject(ctx, rec.ObjectKey)
	switch {
	case isNoSuchKey(err) && (abort || rec.State == stateAborting || s.lifecycleAborted(rec)):
		return s.markAborted(ctx, rec)
	case isNoSuchKey(err):
		return rec, fmt.Errorf("settle %s: a complete or abort is under way: %w", rec.ClaimID, &idempotency.InProgressError{RetryAfter: time.Second})
	case err != nil:
		return rec, fmt.Errorf("check %s: %w", rec.ClaimID, recordstore.Classify(err))
	}
	obj, foreign := s.objectFromHead(rec.ObjectKey, head)
	done, outcome, err := s.recordCompletion(ctx, rec.ID, rec.ClaimID, obj, foreign)
	return completion(rec, done, outcome, err)
}

// lifecycleAborted reports whether the bucket's rule has aborted rec's S3
// upload by now, if it was not completed: the upload is older than the
// rule's age.
func (s *Service) lifecycleAborted(rec uploadrecord.Stored) bool {
	return s.cfg.AbortIncompleteAfter > 0 && s.store.Now().Sub(rec.CreatedAt) >= s.cfg.AbortIncompleteAfter
}

// ownMultipart returns the tenant's multipart upload, or singlePut when the
// upload is a single PUT.
func (s *Service) ownMultipart(ctx context.Context, tenant, uploadID string, singlePut error) (uploadrecord.Stored, api.Upload, error) {
	rec, err := s.ownRecord(ctx, tenant, uploadID)
	if err != nil {
		return rec, api.Upload{}, err
	}
	if !rec.Multipart() {
		return rec, api.Upload{}, singlePut
	}
	return rec, rec.Upload(), nil
}

// pendingMultipart returns the tenant's pending multipart upload.
func (s *Service) pendingMultipart(ctx context.Context, tenant, uploadID string) (uploadrecord.Stored, api.Upload, error) {
	rec, u, err := s.ownMultipart(ctx, tenant, uploadID, errSinglePut)
	if err == nil && rec.State != recordstore.StatePending {
		err = ErrNotPending
	}
	return rec, u, err
}

var errSinglePut = invalid("uploadId", "this upload is a single PUT; it has no parts")

// storedParts lists every page of the parts S3 holds.
func (s *Service) storedParts(ctx context.Context, rec uploadrecord.Stored) ([]s3types.Part, error) {
	var parts []s3types.Part
	in := &s3.ListPartsInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(rec.ObjectKey), UploadId: aws.String(rec.S3UploadID)}
	// A truncated page that repeats its marker would list itself forever.
	paginator := s3.NewListPartsPaginator(s.objects, in, func(o *s3.ListPartsPaginatorOptions) { o.StopOnDuplicateToken = true })
	for paginator.HasMorePages() {
		page, err := paginator.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		parts = append(parts, page.Parts...)
	}
	return parts, nil
}

// hexChecksum turns S3's base64 SHA-256 of a part into the API's hex.
func hexChecksum(b64 string) string {
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return ""
	}
	return hex.EncodeToString(sum)
}
