package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// ObjectCreated is one object that S3 reports as stored. Finalize takes
// only its bucket, key and time from an event: whether the object exists,
// and its size, ETag, kind and checksum, it asks S3.
type ObjectCreated struct {
	Bucket string
	Key    string // decoded, as stored
	Size   int64
	ETag   string
	Time   time.Time
	// Multipart is true for an object made by CompleteMultipartUpload, as
	// its event says. Finalize does not go by it (nor by Size, ETag or
	// Checksum): it records what its HeadObject finds.
	Multipart bool
	// Checksum is a multipart object's composite SHA-256 ("base64-N").
	Checksum string
}

// Outcome is what Finalize did with an object.
type Outcome string

// Outcomes of Finalize.
const (
	OutcomeCompleted Outcome = "completed" // the record is now completed
	OutcomeDuplicate Outcome = "duplicate" // it already was: a repeated event
	OutcomeSkipped   Outcome = "skipped"   // not ours, or no live claim
	OutcomeRejected  Outcome = "rejected"  // the object does not match its claim
)

// Finalize records that obj was stored, once S3 confirms it: an event is
// an announcement, not a proof (it may be forged, duplicated, or stale:
// delivered after its object was removed), so one HeadObject asks S3 what
// the key holds, and that object is what the one conditional UpdateItem
// records or rejects: its size (never the event's), ETag, checksum and
// stored headers. Without an object, nothing is recorded, and an expired
// claim is not revived. It returns an error only when a retry can help
// (S3 or the store is unavailable); everything else is an Outcome,
// because an error makes Lambda re-deliver the event in vain.
func (s *Service) Finalize(ctx context.Context, obj ObjectCreated) (Outcome, error) {
	uploadID, ok := strings.CutPrefix(obj.Key, s.cfg.Prefix)
	id, err := ParseUploadID(uploadID)
	if obj.Bucket != s.cfg.Bucket || !ok || err != nil {
		// The key may be anyone's text: log its hash, not the key.
		s.opts.Logger.InfoContext(ctx, "finalize: skipped an object that is not an upload", "bucket", obj.Bucket, "key_sha256", keyHash(obj.Key))
		return OutcomeSkipped, nil
	}
	head, err := s.headObject(ctx, obj.Key)
	switch {
	case isNoSuchKey(err):
		s.opts.Logger.InfoContext(ctx, "finalize: skipped, S3 holds no object for this upload", "upload_id", uploadID)
		return OutcomeSkipped, nil
	case err != nil:
		return "", fmt.Errorf("finalize %s: check the object: %w", uploadID, recordstore.Classify(err))
	}
	found, foreign := s.objectFromHead(obj.Key, head)
	if !obj.Time.IsZero() {
		// When the event says S3 stored it: a multipart object's
		// LastModified is when its upload began.
		found.Time = obj.Time
	}
	_, outcome, err := s.recordCompletion(ctx, id, uploadID, found, foreign)
	return outcome, err
}

// recordCompletion moves the pending claim of obj to completed with one
// conditional UpdateItem that also requires the claimed size: finalize's
// write, which Complete, Status and Abort make too once they see the
// object. An object carrying foreign headers (see foreignHeaders) matches
// no claim: its update requires size 0, which no claim has, so it is
// refused and handled as an object of the wrong size, with the record the
// refusal returns.
func (s *Service) recordCompletion(ctx context.Context, id idempotency.ID, uploadID string, obj ObjectCreated, foreign []string) (uploadrecord.Stored, Outcome, error) {
	log := s.opts.Logger.With("upload_id", uploadID)
	required := obj.Size
	if len(foreign) > 0 {
		required = 0
	}
	var spent []string
	if !obj.Multipart {
		// A single PUT's cut URL and token rebuilt its pending body; the
		// completed body is rendered from the other fields, and without
		// them the record is a write unit smaller on Lambda, which every
		// refused finalize after a heal is billed by. (A multipart record
		// never holds them.)
		spent = []string{uploadrecord.AttrPutURL, uploadrecord.AttrPutToken}
	}
	rec, err := s.store.Update(ctx, id, uploadID, recordstore.Update{
		State:         idempotency.StateCompleted,
		Data:          uploadrecord.Fields{ETag: unquoteETag(obj.ETag), CompletedAt: obj.Time.UTC().Format(timeFormat), Checksum: obj.Checksum},
		RemoveData:    spent,
		Require:       map[string]any{uploadrecord.AttrSize: required},
		RestartExpiry: true,
		// S3 accepted the object through this claim's URL, which never
		// outlives the claim; only its announcement may come later. (Every
		// caller has seen the object in S3 first.)
		Revive: true,
	})
	var conflict *recordstore.ConflictError
	switch {
	case err == nil:
		log.InfoContext(ctx, "finalized")
		done, err := uploadrecord.Decode(rec)
		return done, OutcomeCompleted, err
	case errors.Is(err, idempotency.ErrNotFound):
		log.InfoContext(ctx, "finalize: skipped, no live claim for this upload id")
		return uploadrecord.Stored{}, OutcomeSkipped, nil
	case !errors.As(err, &conflict):
		return uploadrecord.Stored{}, "", fmt.Errorf("finalize %s: %w", uploadID, err)
	}
	existing, derr := uploadrecord.Decode(conflict.Existing)
	if derr != nil {
		return uploadrecord.Stored{}, "", derr
	}
	switch {
	case errors.Is(err, recordstore.ErrAborted):
		// An object made for an upload recorded as aborted (a Complete that
		// raced the abort): aborted means no object, so it goes, if it is
		// still the one announced.
		if obj.ETag == "" {
			log.WarnContext(ctx, "finalize: an object made for an aborted upload, without an ETag to remove it by; kept")
			return existing, OutcomeDuplicate, nil
		}
		_, err := s.objects.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(obj.Bucket), Key: aws.String(obj.Key), IfMatch: aws.String(quoteETag(obj.ETag))})
		switch {
		case apiErrorCode(err) == "PreconditionFailed":
			log.InfoContext(ctx, "finalize: the object of an aborted upload was replaced since; kept")
		case err != nil:
			return existing, "", fmt.Errorf("finalize %s: remove the object of an aborted upload: %w", uploadID, recordstore.Classify(err))
		default:
			log.WarnContext(ctx, "finalize: removed an object made for an aborted upload")
		}
		return existing, OutcomeDuplicate, nil
	case errors.Is(err, idempotency.ErrAlreadyCompleted):
		log.InfoContext(ctx, "finalize: duplicate event")
		return existing, OutcomeDuplicate, nil
	case errors.Is(err, recordstore.ErrMismatch):
		return existing, OutcomeRejected, s.removeMismatch(ctx, log, existing, obj, foreign)
	default:
		return uploadrecord.Stored{}, "", fmt.Errorf("finalize %s: %w", uploadID, err)
	}
}

// removeMismatch deletes an object that does not match its claim (its
// size, or headers the server did not choose), as S3 reported it before
// the update; the record stays pending, so the client can PUT again. The
// delete is conditional on the ETag that was checked, so an object of other
// bytes that replaced it since is never the one removed. (A URL never
// overwrites, so only a writer with access to the bucket, or a URL signed
// before URLs carried If-None-Match, can replace it.)
func (s *Service) removeMismatch(ctx context.Context, log *slog.Logger, rec uploadrecord.Stored, obj ObjectCreated, foreign []string) error {
	if len(foreign) > 0 {
		log.ErrorContext(ctx, "finalize: the object carries headers the server did not choose", "headers", strings.Join(foreign, ","))
	} else {
		log.ErrorContext(ctx, "finalize: object size does not match the claim", "claimed", rec.Size, "stored", obj.Size)
	}
	if obj.ETag == "" {
		log.ErrorContext(ctx, "finalize: S3 gave the mismatched object no ETag to remove it by; kept")
		return nil
	}
	_, err := s.objects.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(obj.Bucket), Key: aws.String(obj.Key), IfMatch: aws.String(quoteETag(obj.ETag))})
	switch {
	case apiErrorCode(err) == "PreconditionFailed":
		log.InfoContext(ctx, "finalize: the object was replaced since it was checked; kept")
		return nil
	case isNoSuchKey(err):
		return nil
	case err != nil:
		return fmt.Errorf("finalize %s: delete mismatched object: %w", rec.ClaimID, recordstore.Classify(err))
	}
	log.InfoContext(ctx, "finalize: removed the mismatched object")
	return nil
}

// quoteETag gives an ETag the quotes an If-Match header wants (events
// carry it bare).
func quoteETag(etag string) string { return `"` + unquoteETag(etag) + `"` }

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// objectFromHead is the object a HeadObject (with checksums) found at key,
// as finalize records it: S3's size and ETag, completed when S3 last
// modified it, and S3's composite checksum for a multipart object. It also
// names the stored headers the server did not choose (foreignHeaders).
func (s *Service) objectFromHead(key string, head *s3.HeadObjectOutput) (ObjectCreated, []string) {
	obj := ObjectCreated{Bucket: s.cfg.Bucket, Key: key, Size: aws.ToInt64(head.ContentLength), ETag: aws.ToString(head.ETag), Time: aws.ToTime(head.LastModified)}
	if obj.Time.IsZero() {
		obj.Time = s.store.Now()
	}
	// A composite checksum reads "base64-N"; base64 has no '-'. A single
	// PUT's is the file's own SHA-256, which its body already states.
	if sum := aws.ToString(head.ChecksumSHA256); strings.Contains(sum, "-") {
		obj.Multipart, obj.Checksum = true, sum
	}
	return obj, foreignHeaders(head)
}

// foreignHeaders names the headers S3 stored with an object that the
// server did not choose. S3 keeps these five with an object and sends them
// to whoever reads it (a Content-Disposition with a file name of the
// uploader's choice, a Content-Encoding that makes a browser decode the
// bytes, caching and language), and a presigned PUT cannot forbid them: a
// signature only covers the headers it names, so a client may add any of
// them. The server chooses none (it signs no Content-Disposition: how to
// serve an object is for whoever serves it), so an object carrying one is
// not what the server decided, and finalize rejects it as it rejects a
// wrong size.
func foreignHeaders(head *s3.HeadObjectOutput) []string {
	var names []string
	for _, h := range []struct {
		name  string
		value *string
	}{
		{"Content-Disposition", head.ContentDisposition},
		{"Content-Encoding", head.ContentEncoding},
		{"Cache-Control", head.CacheControl},
		{"Expires", head.ExpiresString}, // as stored, parseable or not
		{"Content-Language", head.ContentLanguage},
	} {
		v := aws.ToString(h.value)
		if v == "" || h.name == "Cache-Control" && browserCacheControl(v) {
			continue
		}
		names = append(names, h.name)
	}
	return names
}

// browserCacheControl reports a Cache-Control value a browser adds by itself
// to a request that sets a conditional header (If-None-Match, which every
// URL signs): Chromium sends max-age=0, and no-cache is the Fetch
// standard's. Both only forbid caching the object unrevalidated, so they
// are stored and served harmlessly; any other value is the uploader's.
func browserCacheControl(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "max-age=0" || v == "no-cache"
}

// headObject asks S3 for key's object with its checksum.
func (s *Service) headObject(ctx context.Context, key string) (*s3.HeadObjectOutput, error) {
	return s.objects.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key), ChecksumMode: s3types.ChecksumModeEnabled})
}
