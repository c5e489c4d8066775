package upload

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Abort aborts a pending multipart upload: S3 first, so that no Complete
// can succeed after the record says aborted; then the record, which from
// then on answers with the aborted body. Aborting again answers the same.
// Errors: ErrNotFound, ErrCompleted, *api.RequestError (a single PUT), the
// store's.
func (s *Service) Abort(ctx context.Context, tenant, uploadID string) (Result, error) {
	rec, _, err := s.ownMultipart(ctx, tenant, uploadID,
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
		case errors.Is(err, idempotency.ErrNotFound):
			return Result{}, ErrNotFound
		case err != nil:
			return Result{}, fmt.Errorf("abort %s: %w", uploadID, err)
		}
	}
	if !rec.Final() {
		if rec, err = s.abortAtS3(ctx, rec); err != nil {
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

// abortAtS3 aborts rec's S3 multipart upload and records the outcome:
// aborted, or, if S3 no longer has the upload, what its object says
// (settleGone: a Complete that got there first is recorded as completed).
func (s *Service) abortAtS3(ctx context.Context, rec uploadrecord.Stored) (uploadrecord.Stored, error) {
	_, err := s.objects.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(rec.ObjectKey), UploadId: aws.String(rec.S3UploadID),
	})
	switch {
	case isNoSuchUpload(err):
		return s.settleGone(ctx, rec, true)
	case err != nil:
		return rec, fmt.Errorf("abort %s: %w", rec.ClaimID, recordstore.Classify(err))
	}
	return s.markAborted(ctx, rec)
}

// markAborted records that the upload's S3 multipart upload is gone without
// an object. The record becomes final (state aborted), so every later
// request, a replay of the create included, answers with it.
func (s *Service) markAborted(ctx context.Context, rec uploadrecord.Stored) (uploadrecord.Stored, error) {
	done, err := s.update(ctx, rec, recordstore.Update{
		State: recordstore.StateAborted, Data: uploadrecord.Fields{CompletedAt: s.store.Now().UTC().Format(timeFormat)}, RestartExpiry: true,
	})
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return rec, ErrNotFound
	case err != nil:
		return rec, fmt.Errorf("abort %s: %w", rec.ClaimID, err)
	}
	return done, nil
}
