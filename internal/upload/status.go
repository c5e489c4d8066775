package upload

import (
	"context"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Status returns the tenant's upload: completed, or pending with a valid
// URL. A pending record whose object is already in S3 (its event was lost
// or is late) is completed here and now: EffectHealed. Errors: ErrNotFound
// (unknown, expired, or another tenant's), and the store's.
func (s *Service) Status(ctx context.Context, tenant, uploadID string) (Result, error) {
	rec, err := s.ownRecord(ctx, tenant, uploadID)
	if err != nil {
		return Result{}, err
	}
	effect := EffectServed
	if !rec.Final() {
		rec, err = s.healFromS3(ctx, rec)
		if err != nil {
			return Result{}, err
		}
		if rec.State == idempotency.StateCompleted {
			effect = EffectHealed
		}
	}
	body, err := s.replayBody(ctx, rec)
	if err != nil {
		return Result{}, err
	}
	return Result{UploadID: uploadID, Body: body, Effect: effect}, nil
}

// healFromS3 completes a pending record whose object exists, with one
// HeadObject, as finalize would: an object of the wrong size or with a
// header the server did not choose is removed instead. An S3 failure
// leaves the record pending: the event may still come, and the client can
// ask again.
func (s *Service) healFromS3(ctx context.Context, rec uploadrecord.Stored) (uploadrecord.Stored, error) {
	head, err := s.headObject(ctx, rec.ObjectKey)
	switch {
	case isNoSuchKey(err) && rec.Multipart() && s.lifecycleAborted(rec):
		// No object, and the bucket's rule has aborted the S3 upload by now.
		return s.markAborted(ctx, rec)
	case err != nil:
		if !isNoSuchKey(err) {
			s.opts.Logger.WarnContext(ctx, "status: cannot check the object", "upload_id", rec.ClaimID, "error", err)
		}
		return rec, nil
	}
	obj, foreign := s.objectFromHead(rec.ObjectKey, head)
	done, outcome, err := s.recordCompletion(ctx, rec.ID, rec.ClaimID, obj, foreign)
	if err != nil {
		return rec, err
	}
	if outcome == OutcomeCompleted {
		s.opts.Logger.InfoContext(ctx, "finalized from status: the object exists but no event recorded it", "upload_id", rec.ClaimID)
	}
	if done.Final() {
		return done, nil // completed, or aborted by a racing request
	}
	return rec, nil
}
