package upload

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/recordstore"
	"github.com/onceupload/onceupload/pkg/api"
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

// Config is what a deployment decides.
type Config struct {
	// Bucket receives the uploads.
	Bucket string
	// Prefix starts every object key; finalize ignores objects outside it.
	Prefix string
	// PresignTTL is the lifetime of a presigned URL; no URL outlives its
	// claim, whatever this says.
	PresignTTL time.Duration
	// KeyTTL is how long a key's record lives (give the store the same).
	// Defaults to 24 hours.
	KeyTTL time.Duration
	// AbortIncompleteAfter is the bucket's lifecycle rule: how long after
	// it began S3 aborts an unfinished multipart upload. Defaults to KeyTTL
	// in whole days plus one, as the template's rule.
	AbortIncompleteAfter time.Duration
	// MaxUploadBytes is the largest size accepted.
	MaxUploadBytes int64
	// MaxPendingMultipart caps each tenant's multipart uploads that are
	// neither completed, aborted nor expired: a create past it fails with
	// ErrTooManyUploads. 0 sets no cap. With a cap, the store must be an
	// recordstore.GroupCounter on a table with the group index
	// (recordstore.Schema.GroupIndex).
	MaxPendingMultipart int
	// AllowedContentTypes are lower-case media types ("image/png") or
	// wildcards ("image/*"); empty allows any valid type.
	AllowedContentTypes []string
}

func (c *Config) allows(mediaType string) bool {
	if len(c.AllowedContentTypes) == 0 {
		return true
	}
	typ, _, _ := strings.Cut(mediaType, "/")
	for _, allowed := range c.AllowedContentTypes {
		if allowed == mediaType || allowed == typ+"/*" || allowed == "*/*" {
			return true
		}
	}
	return false
}

// Options tune a Service.
type Options struct {
	// Now is the clock. Defaults to time.Now; give the store the same one.
	Now func() time.Time
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

// New returns a Service.
func New(store recordstore.Store, presigner Presigner, objects ObjectAPI, cfg Config, optFns ...func(*Options)) *Service {
	o := Options{Now: time.Now, Random: rand.Reader, Logger: slog.Default()}
	for _, fn := range optFns {
		fn(&o)
	}
	if cfg.KeyTTL <= 0 {
		cfg.KeyTTL = recordstore.DefaultTTL
	}
	if cfg.AbortIncompleteAfter <= 0 {
		const day = 24 * time.Hour
		cfg.AbortIncompleteAfter = (cfg.KeyTTL+day-1)/day*day + day
	}
	return &Service{store: store, presigner: presigner, objects: objects, cfg: cfg, opts: o}
}

// Result is a successful answer of the service: the upload it is about,
// the body rendered for it, and what the service did. It says nothing of
// HTTP; the caller chooses how to answer each Effect.
type Result struct {
	UploadID string
	// Body is the answer as compact JSON: an upload, signed parts or a
	// part list. A create records it with its claim, and a replay returns
	// those bytes verbatim (re-signed only once its URL has expired).
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

// Create claims key for the tenant and answers with a presigned PUT
// (EffectCreated), or replays the answer recorded for the key
// (EffectReplayed). The record holds the answer's body, the bytes every
// replay returns; how to answer is the caller's choice. Errors:
// *ValidationError, ErrFileTooLarge, ErrNeedsParts, ErrUnsupportedMedia,
// ErrTooManyUploads (a new multipart upload past the tenant's cap), and the
// store's ErrKeyReused, ErrInProgress and ErrUnavailable (test with
// errors.Is).
func (s *Service) Create(ctx context.Context, tenant, key string, req api.CreateRequest) (Result, error) {
	r, err := canonical(req, &s.cfg)
	if err != nil {
		return Result{}, err
	}
	id := recordstore.NewID(tenant, key)
	uploadID, err := newUploadID(id, s.opts.Random)
	if err != nil {
		return Result{}, err
	}
	pending := api.Upload{
		UploadID: uploadID, Status: api.StatusPending, StorageKey: s.cfg.Prefix + uploadID,
		Filename: r.Filename, ContentType: r.ContentType, Bytes: r.Size, SHA256: r.SHA256,
	}
	claim := recordstore.Record{ID: id, Tenant: tenant, ClaimID: uploadID, Fingerprint: fingerprint(tenant, r)}
	f := fields{
		ObjectKey: pending.StorageKey, Filename: r.Filename, ContentType: r.ContentType,
		Size: r.Size, SHA256: r.SHA256, PartSize: r.PartSize,
	}
	if r.PartSize > 0 {
		pending.Multipart = &api.Multipart{PartSize: r.PartSize, PartCount: api.PartCount(r.Size, r.PartSize)}
		claim.State = recordstore.StateInProgress
		if claim.Data, err = f.attrs(); err != nil {
			return Result{}, err
		}
		return s.createMultipart(ctx, claim, pending)
	}
	// Everything the record holds is computed before the one put, so no
	// record ever exists without its response. The URL expires no later
	// than the claim will.
	body, urlExpires, err := s.pendingBody(ctx, pending, min(s.cfg.PresignTTL, s.cfg.KeyTTL))
	if err != nil {
		return Result{}, err
	}
	claim.State = recordstore.StatePending
	claim.Response = recordstore.Response{Body: body}
	f.URLExpires = urlExpires
	if claim.Data, err = f.attrs(); err != nil {
		return Result{}, err
	}
	res, err := s.store.Claim(ctx, claim)
	if err != nil {
		return Result{}, s.claimError(ctx, err)
	}
	if res.Replayed {
		return s.replay(ctx, res.Record)
	}
	s.opts.Logger.InfoContext(ctx, "claimed", "upload_id", uploadID)
	return Result{UploadID: uploadID, Body: body, Effect: EffectCreated}, nil
}

// claimError logs and wraps a claim that did not go through.
func (s *Service) claimError(ctx context.Context, err error) error {
	var conflict *recordstore.ConflictError
	if errors.As(err, &conflict) {
		s.opts.Logger.InfoContext(ctx, "key reused with a different request", "upload_id", conflict.Existing.ClaimID)
	}
	return fmt.Errorf("create: %w", err)
}

// replay answers a create from the record that holds its key.
func (s *Service) replay(ctx context.Context, holder recordstore.Record) (Result, error) {
	rec, err := decodeStored(holder)
	if err != nil {
		return Result{}, err
	}
	body, err := s.replayBody(ctx, rec)
	if err != nil {
		return Result{}, err
	}
	s.opts.Logger.InfoContext(ctx, "replayed", "upload_id", rec.ClaimID, "state", rec.State)
	return Result{UploadID: rec.ClaimID, Body: body, Effect: EffectReplayed}, nil
}

// replayBody is the answer recorded for rec: the completed body, or the
// pending body as first sent while its URL is valid, else re-signed.
func (s *Service) replayBody(ctx context.Context, rec stored) ([]byte, error) {
	if rec.final() {
		return finalBody(rec)
	}
	if rec.multipart() {
		return rec.Response.Body, nil // no URL in it: parts are signed on request
	}
	if expires, err := time.Parse(timeFormat, rec.URLExpires); err == nil && s.opts.Now().Before(expires) {
		return rec.Response.Body, nil
	}
	body, _, err := s.pendingBody(ctx, rec.upload(), s.urlLifetime(rec.ExpiresAt))
	return body, err
}

// pendingBody presigns the PUT for u, valid for lifetime, and renders the
// pending body; it returns the URL's expiry as the body states it.
func (s *Service) pendingBody(ctx context.Context, u api.Upload, lifetime time.Duration) ([]byte, string, error) {
	sum, err := hex.DecodeString(u.SHA256)
	if err != nil {
		return nil, "", fmt.Errorf("presign %s: sha256: %w", u.UploadID, err)
	}
	// Signing Content-Length, Content-Type and the checksum makes S3 itself
	// refuse any other bytes.
	req, err := s.presigner.PresignPutObject(ctx, &PresignInput{
		Key:            u.StorageKey,
		ContentType:    u.ContentType,
		ContentLength:  u.Bytes,
		ChecksumSHA256: base64.StdEncoding.EncodeToString(sum),
		Expires:        lifetime,
	})
	if err != nil {
		return nil, "", fmt.Errorf("presign %s: %w", u.UploadID, err)
	}
	if u.Upload, err = putInstructions(req); err != nil {
		return nil, "", fmt.Errorf("presign %s: %w", u.UploadID, err)
	}
	body, err := encode(u)
	return body, u.Upload.ExpiresAt, err
}

// putInstructions tells a client how to use a presigned PUT: every signed
// header but Host and Content-Length (HTTP clients set those), and when the
// URL stops working, read from the URL itself so it is the signer's.
func putInstructions(req *v4.PresignedHTTPRequest) (*api.PutInstructions, error) {
	expires, err := presignedExpiry(req.URL)
	if err != nil {
		return nil, err
	}
	headers := make(map[string]string, len(req.SignedHeader))
	for name, values := range req.SignedHeader {
		switch {
		case name == "Host" || name == "Content-Length" || len(values) == 0:
		case strings.HasPrefix(name, "X-Amz-"):
			headers[strings.ToLower(name)] = values[0]
		default:
			headers[name] = values[0]
		}
	}
	return &api.PutInstructions{Method: http.MethodPut, URL: req.URL, Headers: headers, ExpiresAt: expires.Format(timeFormat)}, nil
}

// presignedExpiry reads when a SigV4 presigned URL stops working from its
// own X-Amz-Date and X-Amz-Expires, so the reported time is the signer's.
// It scans the query rather than parsing it: this is on the hot path.
func presignedExpiry(rawURL string) (time.Time, error) {
	param := func(name string) string {
		_, query, _ := strings.Cut(rawURL, "?")
		for query != "" {
			var kv string
			kv, query, _ = strings.Cut(query, "&")
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
	signed, err := time.Parse("20060102T150405Z", param("X-Amz-Date"))
	if err != nil {
		return time.Time{}, fmt.Errorf("presigned URL date: %w", err)
	}
	secs, err := strconv.Atoi(param("X-Amz-Expires"))
	if err != nil {
		return time.Time{}, fmt.Errorf("presigned URL expiry: %w", err)
	}
	return signed.Add(time.Duration(secs) * time.Second).UTC(), nil
}

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
	if !rec.final() {
		rec, err = s.healFromS3(ctx, rec)
		if err != nil {
			return Result{}, err
		}
		if rec.State == recordstore.StateCompleted {
			effect = EffectHealed
		}
	}
	body, err := s.replayBody(ctx, rec)
	if err != nil {
		return Result{}, err
	}
	return Result{UploadID: uploadID, Body: body, Effect: effect}, nil
}

// objectFromHead is the object a HeadObject (with checksums) found at key,
// as finalize records it: S3's size and ETag, completed when S3 last
// modified it, and S3's composite checksum for a multipart object. It also
// names the stored headers the server did not choose (foreignHeaders).
func (s *Service) objectFromHead(key string, head *s3.HeadObjectOutput) (ObjectCreated, []string) {
	obj := ObjectCreated{Bucket: s.cfg.Bucket, Key: key, Size: aws.ToInt64(head.ContentLength), ETag: aws.ToString(head.ETag), Time: aws.ToTime(head.LastModified)}
	if obj.Time.IsZero() {
		obj.Time = s.opts.Now()
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

// healFromS3 completes a pending record whose object exists, with one
// HeadObject, as finalize would: an object of the wrong size or with a
// header the server did not choose is removed instead. An S3 failure
// leaves the record pending: the event may still come, and the client can
// ask again.
func (s *Service) healFromS3(ctx context.Context, rec stored) (stored, error) {
	head, err := s.headObject(ctx, rec.ObjectKey)
	switch {
	case isNotFound(err) && rec.multipart() && s.opts.Now().Sub(rec.CreatedAt) >= s.cfg.AbortIncompleteAfter:
		// No object, and the bucket's rule has aborted the S3 upload by now.
		return s.markAborted(ctx, rec)
	case err != nil:
		if !isNotFound(err) {
			s.opts.Logger.WarnContext(ctx, "status: cannot check the object", "upload_id", rec.ClaimID, "error", err)
		}
		return rec, nil
	}
	obj, foreign := s.objectFromHead(rec.ObjectKey, head)
	done, outcome, err := s.complete(ctx, rec.ID, rec.ClaimID, obj, foreign)
	if err != nil {
		return rec, err
	}
	if outcome == OutcomeCompleted {
		s.opts.Logger.InfoContext(ctx, "finalized from status: the object exists but no event recorded it", "upload_id", rec.ClaimID)
	}
	if done.final() {
		return done, nil // completed, or aborted by a racing request
	}
	return rec, nil
}

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
	case isNotFound(err):
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
	_, outcome, err := s.complete(ctx, id, uploadID, found, foreign)
	return outcome, err
}

// complete moves the pending claim of obj to completed with one conditional
// UpdateItem that also requires the claimed size. An object carrying
// foreign headers (see foreignHeaders) matches no claim: its update
// requires size 0, which no claim has, so it is refused and handled as an
// object of the wrong size, with the record the refusal returns.
func (s *Service) complete(ctx context.Context, id recordstore.ID, uploadID string, obj ObjectCreated, foreign []string) (stored, Outcome, error) {
	log := s.opts.Logger.With("upload_id", uploadID)
	required := obj.Size
	if len(foreign) > 0 {
		required = 0
	}
	rec, err := s.store.Update(ctx, id, uploadID, recordstore.Update{
		State:         recordstore.StateCompleted,
		Data:          fields{ETag: unquoteETag(obj.ETag), CompletedAt: obj.Time.UTC().Format(timeFormat), Checksum: obj.Checksum},
		Require:       map[string]any{attrSize: required},
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
		done, err := decodeStored(rec)
		return done, OutcomeCompleted, err
	case errors.Is(err, recordstore.ErrNotFound):
		log.InfoContext(ctx, "finalize: skipped, no live claim for this upload id")
		return stored{}, OutcomeSkipped, nil
	case !errors.As(err, &conflict):
		return stored{}, "", fmt.Errorf("finalize %s: %w", uploadID, err)
	}
	existing, derr := decodeStored(conflict.Existing)
	if derr != nil {
		return stored{}, "", derr
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
	case errors.Is(err, recordstore.ErrAlreadyCompleted):
		log.InfoContext(ctx, "finalize: duplicate event")
		return existing, OutcomeDuplicate, nil
	case errors.Is(err, recordstore.ErrMismatch):
		return existing, OutcomeRejected, s.removeMismatch(ctx, log, existing, obj, foreign)
	default:
		return stored{}, "", fmt.Errorf("finalize %s: %w", uploadID, err)
	}
}

// removeMismatch deletes an object that does not match its claim (its
// size, or headers the server did not choose), as S3 reported it before
// the update; the record stays pending, so the client can PUT again. The
// delete is conditional on the ETag that was checked, so an object of other
// bytes that replaced it since is never the one removed. (A URL never
// overwrites, so only a writer with access to the bucket, or a URL signed
// before URLs carried If-None-Match, can replace it.)
func (s *Service) removeMismatch(ctx context.Context, log *slog.Logger, rec stored, obj ObjectCreated, foreign []string) error {
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
	case isNotFound(err):
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
