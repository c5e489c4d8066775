package upload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Complete completes a multipart upload from what S3 holds: every part
// 1..partCount must be there with its expected size (else
// *PartsMissingError); CompleteMultipartUpload gets each part's ETag and
// checksum, the expected total size, and If-None-Match so it never
// overwrites. Completing again answers the same body, whatever req says,
// and a Complete whose answer was lost is recognised (the object exists)
// and recorded, never repeated.
//
// req is the client's optional declaration. Parts, when given, must name
// every part 1..partCount exactly once (else *api.RequestError); each
// declared SHA-256 is compared with the one S3 holds for that part, and any
// difference is a *PartsMismatchError with nothing stored: the record stays
// pending and the S3 upload stays, so the client can send those parts
// again. The checksums, S3's own and so the declared ones, then go to
// CompleteMultipartUpload, where S3 checks them against the parts once
// more: a part replaced after the list is refused. SHA256, the whole file's,
// fills the upload's sha256 when the create gave none; one that differs
// from the upload's is an *api.RequestError. It is recorded before S3 is
// asked to complete, so that the completed body is the same whoever
// records the completion, this call or finalize on the object's event,
// and the first one recorded stays: a complete that then fails (a part
// changed, S3 unavailable) leaves it, and a later or concurrent complete
// with another is an *api.RequestError too.
//
// A complete that loses a race answers with what won (settleLost): the
// completed body of a twin, ErrNotPending for an abort, ErrInProgress
// while a twin is still at work at S3; never parts missing or unavailable
// for what another request did, and never ErrNotPending from an abort's
// intent alone (settleAborting).
//
// Errors: ErrNotFound, ErrNotPending, *PartsMissingError,
// *PartsMismatchError, *api.RequestError, the store's.
func (s *Service) Complete(ctx context.Context, tenant, uploadID string, req api.CompleteRequest) (Result, error) {
	rec, u, err := s.ownMultipart(ctx, tenant, uploadID, errSinglePut)
	if err != nil {
		return Result{}, err
	}
	if !rec.Final() {
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
func checkDeclaration(rec uploadrecord.Stored, u api.Upload, req api.CompleteRequest) error {
	if req.SHA256 != "" {
		if len(req.SHA256) != 64 || !api.IsHex(req.SHA256) {
			return api.ErrSHA256Format
		}
		if rec.SHA256 != "" && !strings.EqualFold(req.SHA256, string(rec.SHA256)) {
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
		case len(p.SHA256) != 64 || !api.IsHex(p.SHA256):
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

func (s *Service) completeMultipart(ctx context.Context, rec uploadrecord.Stored, u api.Upload, req api.CompleteRequest) (uploadrecord.Stored, error) {
	parts, err := s.storedParts(ctx, rec)
	if isNoSuchUpload(err) {
		return s.settleLost(ctx, rec, nil)
	}
	if err != nil {
		return rec, fmt.Errorf("complete %s: list parts: %w", u.UploadID, recordstore.Classify(err))
	}
	completed, missing := partsToComplete(parts, u)
	if missing != nil {
		// A list taken while an abort removes the parts, or while a twin
		// Complete takes the upload, is short: ask the record, and S3
		// again, before telling the client to send them.
		return s.settleLost(ctx, rec, missing)
	}
	if len(req.Parts) > 0 {
		if err := declaredChecksums(completed, req.Parts); err != nil {
			return rec, err
		}
	}
	if req.SHA256 != "" && rec.SHA256 == "" {
		if rec, err = s.recordSHA256(ctx, rec, strings.ToLower(req.SHA256)); err != nil || rec.Final() {
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
		// or an abort got there first: the record, then the object or its
		// absence, says which.
		return s.settleLost(ctx, rec, nil)
	case apiErrorCode(err) == "InvalidPart" || apiErrorCode(err) == "InvalidPartOrder":
		// A part changed between the list and the complete (a client
		// re-sent it): the next attempt lists it again, and compares it
		// with the declaration if there is one. Or the parts went with
		// the upload: an abort removing them, or a twin Complete that
		// used them; the record says so first.
		return s.settleLost(ctx, rec, fmt.Errorf("complete %s: %w: %w", u.UploadID, idempotency.ErrUnavailable, err))
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
	done, outcome, err := s.recordCompletion(ctx, rec.ID, rec.ClaimID, ObjectCreated{
		Bucket: s.cfg.Bucket, Key: u.StorageKey, Size: u.Bytes, ETag: aws.ToString(out.ETag),
		Multipart: true, Checksum: aws.ToString(out.ChecksumSHA256), Time: s.store.Now(),
	}, nil)
	return completion(rec, done, outcome, err)
}

// settleLost answers a complete that may have lost a race at S3: its
// upload gone (refused nil: NoSuchUpload, or the object already there),
// its list of parts short (refused a *PartsMissingError), or its parts
// refused (refused, the answer if nothing else explains it). What rec
// said when the complete began is stale by then, so the record is read
// again first: completed by a twin, the completed body; aborted, not
// pending; an abort under way (its intent is recorded before S3 is
// asked), settled by S3 (settleAborting). Still pending, S3 decides too: a
// gone upload is settled by its
// object (settleGone: a twin's object is recorded; without one, a twin is
// still at work: in progress), a short list is taken again, and a refused
// Complete whose object is there was a twin's, and is recorded.
func (s *Service) settleLost(ctx context.Context, rec uploadrecord.Stored, refused error) (uploadrecord.Stored, error) {
	now, err := s.reread(ctx, rec)
	switch {
	case err != nil:
		return rec, err
	case now.Final():
		return now, nil
	case refused == nil:
		return s.settleGone(ctx, now, false)
	case now.State == stateAborting:
		return s.settleAborting(ctx, now)
	}
	if _, ok := refused.(*PartsMissingError); ok {
		// S3 may list the parts one by one after it found the upload
		// (Versity Gateway does), so a twin Complete that takes the upload
		// meanwhile leaves the list short: list again. Gone, the upload
		// is settled as gone; still short, the parts are missing; whole
		// now, the upload changed under the first list: retry.
		parts, err := s.storedParts(ctx, now)
		switch {
		case isNoSuchUpload(err):
			return s.settleGone(ctx, now, false)
		case err != nil:
			return now, fmt.Errorf("complete %s: list parts: %w", now.ClaimID, recordstore.Classify(err))
		}
		if _, missing := partsToComplete(parts, now.Upload()); missing != nil {
			return now, missing
		}
		return now, fmt.Errorf("complete %s: the parts changed while listed: %w", now.ClaimID, &idempotency.InProgressError{RetryAfter: time.Second})
	}
	head, err := s.headObject(ctx, now.ObjectKey)
	if err != nil {
		return now, refused
	}
	obj, foreign := s.objectFromHead(now.ObjectKey, head)
	done, outcome, err := s.recordCompletion(ctx, now.ID, now.ClaimID, obj, foreign)
	return completion(now, done, outcome, err)
}

// settleAborting answers a complete refused while an abort is under way
// (rec is in state aborting). The abort's intent is not its outcome: a
// twin's Complete may have taken the upload at S3 before the abort got
// there, and then the abort finds the object and the upload ends
// completed. So S3 decides: the upload gone, its object does (settleGone:
// a twin's object is recorded, none means aborted). The upload still
// there, this complete cannot complete it (S3 refused it, or its parts are
// short), and the abort that began may have stopped before S3 (a timeout,
// S3 unavailable): the complete carries the abort out, so that the upload
// never waits days in between, and answers with its outcome.
func (s *Service) settleAborting(ctx context.Context, rec uploadrecord.Stored) (uploadrecord.Stored, error) {
	// One part is enough to learn whether the upload is there. (An abort
	// sent straight away would not tell: MinIO answers success for an
	// upload that is gone, and a twin's object would be taken for none.)
	_, err := s.objects.ListParts(ctx, &s3.ListPartsInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(rec.ObjectKey), UploadId: aws.String(rec.S3UploadID), MaxParts: aws.Int32(1),
	})
	switch {
	case isNoSuchUpload(err):
		return s.settleGone(ctx, rec, true)
	case err != nil:
		return rec, fmt.Errorf("complete %s: settle an abort under way: %w", rec.ClaimID, recordstore.Classify(err))
	}
	return s.abortAtS3(ctx, rec)
}

// reread reads rec's record again, as ownRecord does.
func (s *Service) reread(ctx context.Context, rec uploadrecord.Stored) (uploadrecord.Stored, error) {
	now, err := s.store.GetRecord(ctx, rec.ID)
	switch {
	case errors.Is(err, idempotency.ErrNotFound) || err == nil && now.ClaimID != rec.ClaimID:
		return rec, ErrNotFound
	case err != nil:
		return rec, fmt.Errorf("complete %s: read again: %w", rec.ClaimID, err)
	}
	return uploadrecord.Decode(now)
}

// partsToComplete matches the parts S3 lists with u's: every part
// 1..partCount with its expected size, for CompleteMultipartUpload, or
// the ones missing (or of the wrong size).
func partsToComplete(parts []s3types.Part, u api.Upload) ([]s3types.CompletedPart, *PartsMissingError) {
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
		return completed, missing
	}
	return completed, nil
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
func (s *Service) recordSHA256(ctx context.Context, rec uploadrecord.Stored, sum string) (uploadrecord.Stored, error) {
	done, err := s.update(ctx, rec, recordstore.Update{
		State: recordstore.StatePending, From: recordstore.StatePending,
		Data: uploadrecord.Fields{SHA256: uploadrecord.Sum256(sum)}, RequireAbsentOrEqual: map[string]any{uploadrecord.AttrSHA256: uploadrecord.Sum256(sum)},
	})
	var conflict *recordstore.ConflictError
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return rec, ErrNotFound
	case errors.Is(err, recordstore.ErrMismatch) && errors.As(err, &conflict) && conflict.Existing.State == recordstore.StatePending:
		// Still pending, so the sha256 is what failed: another complete
		// recorded another one since rec was read.
		return rec, errSHA256Differs
	case errors.Is(err, recordstore.ErrMismatch) && errors.As(err, &conflict):
		// Not pending: an abort has begun, and S3 says how it ends.
		now, err := uploadrecord.Decode(conflict.Existing)
		if err != nil {
			return rec, err
		}
		return s.settleAborting(ctx, now)
	case err != nil:
		return rec, fmt.Errorf("complete %s: record sha256: %w", rec.ClaimID, err)
	}
	return done, nil
}

// completion turns what recordCompletion did with rec's object into the
// record a caller sees: completed (by this call, by finalize, or aborted by
// a racing request, in which case recordCompletion removed the object),
// ErrNotFound when the claim is gone, or an error for an object of the
// wrong size.
func completion(rec, done uploadrecord.Stored, outcome Outcome, err error) (uploadrecord.Stored, error) {
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
