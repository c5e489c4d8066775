package upload

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/recordstore"
	"github.com/onceupload/onceupload/pkg/api"
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
	res, err := s.store.Claim(ctx, claim)
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
		Response: &recordstore.Response{Body: body},
		Data:     fields{S3UploadID: s3UploadID},
	})
	if errors.Is(err, recordstore.ErrNotFound) {
		// Our lease ran out and another request holds the key: this S3
		// upload is nobody's, so abort it now; the client retries.
		s.abortS3(ctx, pending.StorageKey, s3UploadID)
		log.WarnContext(ctx, "multipart create outlived its lease; another request holds the key")
		return Result{}, fmt.Errorf("create %s: %w", claim.ClaimID, &recordstore.InProgressError{RetryAfter: time.Second})
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
// Errors: ErrNotFound, ErrNotPending, *ValidationError, the store's.
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
	if rec.ExpiresAt.Sub(s.opts.Now()) < s.cfg.KeyTTL/2 {
		renewed, err := s.store.Update(ctx, rec.ID, rec.ClaimID, recordstore.Update{
			State: recordstore.StatePending, From: recordstore.StatePending, RestartExpiry: true,
		})
		switch {
		case errors.Is(err, recordstore.ErrAlreadyCompleted) || errors.Is(err, recordstore.ErrAborted) || errors.Is(err, recordstore.ErrMismatch):
			// Completed, aborted, or an abort began since the read.
			return Result{}, ErrNotPending
		case errors.Is(err, recordstore.ErrNotFound):
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
// ErrNotPending, *ValidationError, the store's.
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

// Complete completes a multipart upload from what S3 holds: every part
// 1..partCount must be there with its expected size (else
// *PartsMissingError); CompleteMultipartUpload gets each part's ETag and
// checksum, the expected total size, and If-None-Match so it never
// overwrites. Completing again answers the same body, whatever req says,
// and a Complete whose answer was lost is recognised (the object exists)
// and recorded, never repeated.
//
// req is the client's optional declaration. Parts, when given, must name
// every part 1..partCount exactly once (else *ValidationError); each
// declared SHA-256 is compared with the one S3 holds for that part, and any
// difference is a *PartsMismatchError with nothing stored: the record stays
// pending and the S3 upload stays, so the client can send those parts
// again. The checksums, S3's own and so the declared ones, then go to
// CompleteMultipartUpload, where S3 checks them against the parts once
// more: a part replaced after the list is refused. SHA256, the whole file's,
// fills the upload's sha256 when the create gave none; one that differs
// from the upload's is a *ValidationError. It is recorded before S3 is
// asked to complete, so that the completed body is the same whoever
// records the completion, this call or finalize on the object's event,
// and the first one recorded stays: a complete that then fails (a part
// changed, S3 unavailable) leaves it, and a later or concurrent complete
// with another is a *ValidationError too.
//
// Errors: ErrNotFound, ErrNotPending, *PartsMissingError,
// *PartsMismatchError, *ValidationError, the store's.
func (s *Service) Complete(ctx context.Context, tenant, uploadID string, req api.CompleteRequest) (Result, error) {
	rec, u, err := s.ownMultipart(ctx, tenant, uploadID, errSinglePut)
	if err != nil {
		return Result{}, err
	}
	if !rec.final() {
		if err := checkDeclaration(rec, u, req); err != nil {
			return Result{}, err
		}
		if rec, err = s.completeMultipart(ctx, rec, u, req); err != nil {
			return Result{}, err
		}
	}
	if rec.State == recordstore.StateAborted {
		return Result{}, ErrNotPending
	}
	body, err := finalBody(rec)
	if err != nil {
		return Result{}, err
	}
	return Result{UploadID: uploadID, Body: body, Effect: EffectServed}, nil
}

// checkDeclaration checks a complete's declaration against the upload: the
// parts, if any, name each of its parts once with a SHA-256, and a whole
// file sha256 does not contradict the one it has.
func checkDeclaration(rec stored, u api.Upload, req api.CompleteRequest) error {
	if req.SHA256 != "" {
		if len(req.SHA256) != 64 || !isHex(req.SHA256) {
			return errSHA256Format
		}
		if rec.SHA256 != "" && !strings.EqualFold(req.SHA256, rec.SHA256) {
			return errSHA256Differs
		}
	}
	if len(req.Parts) == 0 {
		return nil
	}
	count := u.Multipart.PartCount
	named := make([]bool, count+1)
	for _, p := range req.Parts {
		switch {
		case p.PartNumber < 1 || p.PartNumber > count:
			return invalid("parts", "partNumber %d is outside 1..%d", p.PartNumber, count)
		case named[p.PartNumber]:
			return invalid("parts", "part %d is listed twice", p.PartNumber)
		case len(p.SHA256) != 64 || !isHex(p.SHA256):
			return invalid("parts", "the sha256 of part %d must be 64 hex characters", p.PartNumber)
		}
		named[p.PartNumber] = true
	}
	if len(req.Parts) == count {
		return nil
	}
	var left []int
	for n := 1; n <= count; n++ {
		if !named[n] && len(left) < 10 {
			left = append(left, n)
		}
	}
	return invalid("parts", "parts must name every part 1..%d exactly once; it leaves out %s", count, partNumbers(left, count-len(req.Parts)))
}

// errSHA256Differs refuses a complete's whole file sha256 that is not the
// one the upload has: given at create, or recorded by an earlier complete
// (the first recorded stays, even if that complete then failed).
var errSHA256Differs = invalid("sha256", "sha256 differs from the sha256 recorded for this upload (given at create or by an earlier complete); complete with that one, or without sha256")

func (s *Service) completeMultipart(ctx context.Context, rec stored, u api.Upload, req api.CompleteRequest) (stored, error) {
	parts, err := s.storedParts(ctx, rec)
	if isNoSuchUpload(err) {
		return s.settleGone(ctx, rec, false)
	}
	if err != nil {
		return rec, fmt.Errorf("complete %s: list parts: %w", u.UploadID, recordstore.Classify(err))
	}
	byNumber := make(map[int32]s3types.Part, len(parts))
	for _, p := range parts {
		byNumber[aws.ToInt32(p.PartNumber)] = p
	}
	missing := &PartsMissingError{}
	completed := make([]s3types.CompletedPart, 0, u.Multipart.PartCount)
	for n := 1; n <= u.Multipart.PartCount; n++ {
		p, ok := byNumber[int32(n)]
		if !ok || aws.ToInt64(p.Size) != api.PartLength(u.Bytes, u.Multipart.PartSize, n) {
			missing.Count++
			if len(missing.Missing) < 10 {
				missing.Missing = append(missing.Missing, n)
			}
			continue
		}
		completed = append(completed, s3types.CompletedPart{PartNumber: p.PartNumber, ETag: p.ETag, ChecksumSHA256: p.ChecksumSHA256})
	}
	if missing.Count > 0 {
		return rec, missing
	}
	if len(req.Parts) > 0 {
		if err := declaredChecksums(completed, req.Parts); err != nil {
			return rec, err
		}
	}
	if req.SHA256 != "" && rec.SHA256 == "" {
		if rec, err = s.recordSHA256(ctx, rec, strings.ToLower(req.SHA256)); err != nil || rec.final() {
			return rec, err
		}
	}
	out, err := s.objects.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(u.StorageKey), UploadId: aws.String(rec.S3UploadID),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: completed},
		MpuObjectSize:   aws.Int64(u.Bytes),
		IfNoneMatch:     aws.String("*"),
	})
	switch {
	case isNoSuchUpload(err) || apiErrorCode(err) == "PreconditionFailed" || apiErrorCode(err) == "ConditionalRequestConflict":
		// An earlier Complete (whose answer was lost, or still at work)
		// or an abort got there first: the object, or its absence, says
		// which.
		return s.settleGone(ctx, rec, false)
	case apiErrorCode(err) == "InvalidPart" || apiErrorCode(err) == "InvalidPartOrder":
		// A part changed between the list and the complete (a client
		// re-sent it); the next attempt lists it again, and compares it
		// with the declaration if there is one.
		return rec, fmt.Errorf("complete %s: %w: %w", u.UploadID, recordstore.ErrUnavailable, err)
	case err != nil:
		return rec, fmt.Errorf("complete %s: %w", u.UploadID, recordstore.Classify(err))
	}
	if aws.ToString(out.ChecksumSHA256) == "" {
		// A Complete that repeats one already done (two completes raced)
		// may be answered 200 without the object's checksums (Versity
		// Gateway does); the object has them, so ask it, as for a
		// Complete whose answer was lost.
		return s.settleGone(ctx, rec, false)
	}
	// The object is the one this Complete made, with what the service
	// chose: no HeadObject needed.
	done, outcome, err := s.complete(ctx, rec.ID, rec.ClaimID, ObjectCreated{
		Bucket: s.cfg.Bucket, Key: u.StorageKey, Size: u.Bytes, ETag: aws.ToString(out.ETag),
		Multipart: true, Checksum: aws.ToString(out.ChecksumSHA256), Time: s.opts.Now(),
	}, nil)
	return completion(rec, done, outcome, err)
}

// declaredChecksums compares each declared part SHA-256 with the one S3
// holds for the part (completed, in part order, one per part). Any
// difference is a *PartsMismatchError. When all agree, completed already
// carries them, for S3 to check again at CompleteMultipartUpload.
func declaredChecksums(completed []s3types.CompletedPart, declared []api.PartToSign) error {
	want := make([]string, len(completed)+1)
	for _, p := range declared {
		want[p.PartNumber] = strings.ToLower(p.SHA256)
	}
	mismatch := &PartsMismatchError{}
	for _, p := range completed {
		n := aws.ToInt32(p.PartNumber)
		if hexChecksum(aws.ToString(p.ChecksumSHA256)) != want[n] {
			mismatch.Count++
			if len(mismatch.Mismatched) < 10 {
				mismatch.Mismatched = append(mismatch.Mismatched, int(n))
			}
		}
	}
	if mismatch.Count > 0 {
		return mismatch
	}
	return nil
}

// recordSHA256 records the whole file's SHA-256 that a complete gave on the
// pending record, before S3 is asked to complete: whoever then records the
// completion (this call, or finalize on the object's event, which may come
// first) renders it into the one completed body. The write sets it only
// if the record has none or the same one, so the first recorded wins, among
// concurrent completes too: a complete never goes on to S3 with a sha256
// the record does not hold. It stays if its complete then fails (a failed
// complete cannot tell whether a concurrent one relies on it). It returns
// the record as it is now, final if the upload was completed or aborted
// meanwhile; errSHA256Differs if another sha256 is recorded.
func (s *Service) recordSHA256(ctx context.Context, rec stored, sum string) (stored, error) {
	done, err := s.update(ctx, rec, recordstore.Update{
		State: recordstore.StatePending, From: recordstore.StatePending,
		Data: fields{SHA256: sum}, RequireAbsentOrEqual: map[string]any{attrSHA256: sum},
	})
	var conflict *recordstore.ConflictError
	switch {
	case errors.Is(err, recordstore.ErrNotFound):
		return rec, ErrNotFound
	case errors.Is(err, recordstore.ErrMismatch) && errors.As(err, &conflict) && conflict.Existing.State == recordstore.StatePending:
		// Still pending, so the sha256 is what failed: another complete
		// recorded another one since rec was read.
		return rec, errSHA256Differs
	case errors.Is(err, recordstore.ErrMismatch):
		// Not pending: an abort has begun.
		return rec, ErrNotPending
	case err != nil:
		return rec, fmt.Errorf("complete %s: record sha256: %w", rec.ClaimID, err)
	}
	return done, nil
}

// completion turns what complete did with rec's object into the record a
// caller sees: completed (by this call, by finalize, or aborted by a
// racing request, in which case complete removed the object), ErrNotFound
// when the claim is gone, or an error for an object of the wrong size.
func completion(rec, done stored, outcome Outcome, err error) (stored, error) {
	switch {
	case err != nil:
		return rec, err
	case outcome == OutcomeSkipped:
		return rec, ErrNotFound
	case outcome == OutcomeRejected:
		return rec, fmt.Errorf("complete %s: the object does not match its claim", rec.ClaimID)
	}
	return done, nil
}

// settleGone decides what became of a multipart upload that S3 no longer
// has: completed if the object is there (recorded now, as finalize would).
// Without an object it is aborted only when that cannot be a Complete
// still at work: S3 drops the upload when a Complete starts and shows the
// object only when it ends, so a younger upload without either is in
// progress (ErrInProgress: retry), unless the caller is aborting it (abort), or it is old enough for
// the bucket's lifecycle rule to have aborted it.
func (s *Service) settleGone(ctx context.Context, rec stored, abort bool) (stored, error) {
	head, err := s.headObject(ctx, rec.ObjectKey)
	switch {
	case isNotFound(err) && (abort || rec.State == stateAborting || s.opts.Now().Sub(rec.CreatedAt) >= s.cfg.AbortIncompleteAfter):
		return s.markAborted(ctx, rec)
	case isNotFound(err):
		return rec, fmt.Errorf("settle %s: a complete or abort is under way: %w", rec.ClaimID, &recordstore.InProgressError{RetryAfter: time.Second})
	case err != nil:
		return rec, fmt.Errorf("check %s: %w", rec.ClaimID, recordstore.Classify(err))
	}
	obj, foreign := s.objectFromHead(rec.ObjectKey, head)
	done, outcome, err := s.complete(ctx, rec.ID, rec.ClaimID, obj, foreign)
	return completion(rec, done, outcome, err)
}

// Abort aborts a pending multipart upload: S3 first, so that no Complete
// can succeed after the record says aborted; then the record, which from
// then on answers with the aborted body. Aborting again answers the same.
// Errors: ErrNotFound, ErrCompleted, *ValidationError (a single PUT), the
// store's.
func (s *Service) Abort(ctx context.Context, tenant, uploadID string) (Result, error) {
	rec, u, err := s.ownMultipart(ctx, tenant, uploadID,
		invalid("uploadId", "this upload is a single PUT, which cannot be aborted: its URL expires on its own"))
	if err != nil {
		return Result{}, err
	}
	if rec.State == recordstore.StatePending {
		// The intent first: if the abort stops half-way (S3 done, the
		// record not), whoever finds the S3 upload gone knows it was
		// aborted, rather than waiting for a Complete that is not coming.
		rec, err = s.update(ctx, rec, recordstore.Update{State: stateAborting})
		switch {
		case errors.Is(err, recordstore.ErrNotFound):
			return Result{}, ErrNotFound
		case err != nil:
			return Result{}, fmt.Errorf("abort %s: %w", uploadID, err)
		}
	}
	if !rec.final() {
		_, err := s.objects.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(u.StorageKey), UploadId: aws.String(rec.S3UploadID)})
		switch {
		case isNoSuchUpload(err):
			rec, err = s.settleGone(ctx, rec, true)
		case err != nil:
			return Result{}, fmt.Errorf("abort %s: %w", uploadID, recordstore.Classify(err))
		default:
			rec, err = s.markAborted(ctx, rec)
		}
		if err != nil {
			return Result{}, err
		}
	}
	if rec.State != recordstore.StateAborted {
		return Result{}, ErrCompleted
	}
	body, err := finalBody(rec)
	if err != nil {
		return Result{}, err
	}
	s.opts.Logger.InfoContext(ctx, "aborted", "upload_id", uploadID)
	return Result{UploadID: uploadID, Body: body, Effect: EffectServed}, nil
}

// markAborted records that the upload's S3 multipart upload is gone without
// an object. The record becomes final (state aborted), so every later
// request, a replay of the create included, answers with it.
func (s *Service) markAborted(ctx context.Context, rec stored) (stored, error) {
	done, err := s.update(ctx, rec, recordstore.Update{
		State: recordstore.StateAborted, Data: fields{CompletedAt: s.opts.Now().UTC().Format(timeFormat)}, RestartExpiry: true,
	})
	switch {
	case errors.Is(err, recordstore.ErrNotFound):
		return rec, ErrNotFound
	case err != nil:
		return rec, fmt.Errorf("abort %s: %w", rec.ClaimID, err)
	}
	return done, nil
}

// update applies u to rec's claim and returns the record as it is now: the
// updated one, or the final one that refused the update.
func (s *Service) update(ctx context.Context, rec stored, u recordstore.Update) (stored, error) {
	done, err := s.store.Update(ctx, rec.ID, rec.ClaimID, u)
	var conflict *recordstore.ConflictError
	switch {
	case err == nil:
		return decodeStored(done)
	case errors.As(err, &conflict) && (errors.Is(err, recordstore.ErrAlreadyCompleted) || errors.Is(err, recordstore.ErrAborted)):
		return decodeStored(conflict.Existing)
	default:
		return rec, err
	}
}

// ownMultipart returns the tenant's multipart upload, or singlePut when the
// upload is a single PUT.
func (s *Service) ownMultipart(ctx context.Context, tenant, uploadID string, singlePut error) (stored, api.Upload, error) {
	rec, err := s.ownRecord(ctx, tenant, uploadID)
	if err != nil {
		return rec, api.Upload{}, err
	}
	if !rec.multipart() {
		return rec, api.Upload{}, singlePut
	}
	return rec, rec.upload(), nil
}

// pendingMultipart returns the tenant's pending multipart upload.
func (s *Service) pendingMultipart(ctx context.Context, tenant, uploadID string) (stored, api.Upload, error) {
	rec, u, err := s.ownMultipart(ctx, tenant, uploadID, errSinglePut)
	if err == nil && rec.State != recordstore.StatePending {
		err = ErrNotPending
	}
	return rec, u, err
}

var errSinglePut = invalid("uploadId", "this upload is a single PUT; it has no parts")

// ownRecord reads the live record of uploadID if it is the tenant's:
// anything else (unknown, expired, another claim's or another tenant's) is
// ErrNotFound. A claim still in progress is ErrInProgress.
func (s *Service) ownRecord(ctx context.Context, tenant, uploadID string) (stored, error) {
	id, err := ParseUploadID(uploadID)
	if err != nil {
		return stored{}, ErrNotFound
	}
	rec, err := s.store.Get(ctx, id)
	if errors.Is(err, recordstore.ErrNotFound) || err == nil && (rec.Tenant != tenant || rec.ClaimID != uploadID) {
		return stored{}, ErrNotFound
	}
	if err != nil {
		return stored{}, fmt.Errorf("read %s: %w", uploadID, err)
	}
	if rec.State == recordstore.StateInProgress {
		return stored{}, fmt.Errorf("read %s: %w", uploadID, &recordstore.InProgressError{RetryAfter: time.Second})
	}
	return decodeStored(rec)
}

// storedParts lists every page of the parts S3 holds.
func (s *Service) storedParts(ctx context.Context, rec stored) ([]s3types.Part, error) {
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

// urlLifetime is how long a URL signed now may last: PRESIGN_TTL, but never
// past the claim's expiry, so no URL outlives the record that knows it.
// SigV4 counts whole seconds, at least one.
func (s *Service) urlLifetime(claimExpires time.Time) time.Duration {
	left := claimExpires.Sub(s.opts.Now()).Truncate(time.Second)
	return max(min(s.cfg.PresignTTL, left), time.Second)
}

func isNoSuchUpload(err error) bool { return apiErrorCode(err) == "NoSuchUpload" }

// isNotFound reports S3's answer for an object that is not there: a HEAD
// has no body, so its code comes from the status.
func isNotFound(err error) bool {
	code := apiErrorCode(err)
	return code == "NotFound" || code == "NoSuchKey"
}

func apiErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// hexChecksum turns S3's base64 SHA-256 of a part into the API's hex.
func hexChecksum(b64 string) string {
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return ""
	}
	return hex.EncodeToString(sum)
}
