package upload

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/config"
	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// Presigner presigns the PUTs clients send to S3; [S3Presigner] is the
// implementation.
type Presigner interface {
	PresignPutObject(ctx context.Context, in *PresignInput) (*v4.PresignedHTTPRequest, error)
	PresignUploadPart(ctx context.Context, in *PresignInput) (*v4.PresignedHTTPRequest, error)
}

// ObjectAPI is the part of the SDK's S3 client the service uses, in its
// exact method signatures: a *s3.Client, or a fake in tests.
type ObjectAPI interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	ListParts(ctx context.Context, in *s3.ListPartsInput, optFns ...func(*s3.Options)) (*s3.ListPartsOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

var _ ObjectAPI = (*s3.Client)(nil)

// Config is what a deployment decides: internal/config reads it from the
// environment and holds its defaults.
type Config = config.Upload

// Options tune a Service. Its clock is its store's (recordstore.Store.Now),
// so that the times it compares with a record's expiry are the store's.
type Options struct {
	// Random feeds upload ids. Defaults to crypto/rand.Reader.
	Random io.Reader
	// Logger receives one line per decision. Defaults to slog.Default().
	Logger *slog.Logger
}

// Service creates uploads, reports their status and records their
// completion.
type Service struct {
	store     recordstore.Store
	presigner Presigner
	objects   ObjectAPI
	cfg       Config
	opts      Options
}

// New returns a Service on store: a key lives the store's TTL, and the
// service tells time by the store's clock.
func New(store recordstore.Store, presigner Presigner, objects ObjectAPI, cfg Config, optFns ...func(*Options)) *Service {
	o := Options{Random: rand.Reader, Logger: slog.Default()}
	for _, fn := range optFns {
		fn(&o)
	}
	return &Service{store: store, presigner: presigner, objects: objects, cfg: cfg, opts: o}
}

// Result is a successful answer of the service: the upload it is about,
// the body rendered for it, and what the service did. It says nothing of
// HTTP; the caller chooses how to answer each Effect.
type Result struct {
	UploadID string
	// Body is the answer as compact JSON: an upload, signed parts or a
	// part list. A create records it with its claim (a single PUT's as the
	// fields and URL that rebuild it), and a replay returns those bytes
	// verbatim (re-signed only once its URL has expired).
	Body []byte
	// Effect is what the call did.
	Effect Effect
}

// Effect is what a call on the service did to answer.
type Effect string

// Effects of a Result.
const (
	// EffectCreated: a create claimed its key for a new upload.
	EffectCreated Effect = "created"
	// EffectReplayed: a create's key already held an upload, whose
	// recorded answer this is.
	EffectReplayed Effect = "replayed"
	// EffectHealed: a status found in S3 the object of a pending upload
	// (its event lost or late) and recorded the upload completed.
	EffectHealed Effect = "healed"
	// EffectServed: anything else; an existing upload was read, or changed
	// as asked (its parts signed, listed, completed or aborted).
	EffectServed Effect = "served"
)

// timeFormat renders every time in a body: UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// update applies u to rec's claim and returns the record as it is now: the
// updated one, or the final one that refused the update.
func (s *Service) update(ctx context.Context, rec uploadrecord.Stored, u recordstore.Update) (uploadrecord.Stored, error) {
	done, err := s.store.Update(ctx, rec.ID, rec.ClaimID, u)
	var conflict *recordstore.ConflictError
	switch {
	case err == nil:
		return uploadrecord.Decode(done)
	case errors.As(err, &conflict) && (errors.Is(err, idempotency.ErrAlreadyCompleted) || errors.Is(err, recordstore.ErrAborted)):
		return uploadrecord.Decode(conflict.Existing)
	default:
		return rec, err
	}
}

// ownRecord reads the live record of uploadID if it is the tenant's:
// anything else (unknown, expired, another claim's or another tenant's) is
// ErrNotFound. A claim still in progress is ErrInProgress.
func (s *Service) ownRecord(ctx context.Context, tenant, uploadID string) (uploadrecord.Stored, error) {
	id, err := ParseUploadID(uploadID)
	if err != nil {
		return uploadrecord.Stored{}, ErrNotFound
	}
	rec, err := s.store.GetRecord(ctx, id)
	if errors.Is(err, idempotency.ErrNotFound) || err == nil && (rec.Tenant != tenant || rec.ClaimID != uploadID) {
		return uploadrecord.Stored{}, ErrNotFound
	}
	if err != nil {
		return uploadrecord.Stored{}, fmt.Errorf("read %s: %w", uploadID, err)
	}
	if rec.State == idempotency.StateInProgress {
		return uploadrecord.Stored{}, fmt.Errorf("read %s: %w", uploadID, &idempotency.InProgressError{RetryAfter: time.Second})
	}
	return uploadrecord.Decode(rec)
}
