// Package config reads the functions' settings from environment variables,
// and is the only reader of them (the SDK reads its own AWS_* variables).
// Each function loads its section (LoadPresign, LoadFinalize, LoadEvents):
// the variables that function uses, with their defaults, every invalid
// value reported at once. internal/wiring builds the clients from what it
// returns. The settings are plain values, so this package links no AWS
// client.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// Bounds of MAX_PENDING_MULTIPART_PER_TENANT.
const (
	// DefaultMaxPendingMultipart is its default.
	DefaultMaxPendingMultipart = 100
	// MaxPendingMultipartCap is the largest value it takes: each capped
	// create counts the tenant's uploads, reading every one's keys (about
	// 100 bytes each), so a cap of 10,000 reads up to 1 MB per create.
	MaxPendingMultipartCap = 10000
)

// Presign is the presign function's section.
type Presign struct {
	Service
	// AllowAnonymous lets requests without a principal act as the tenant
	// "anonymous" (ALLOW_ANONYMOUS, default false).
	AllowAnonymous bool
}

// Finalize is the finalize function's section.
type Finalize struct {
	Service
}

// Service is what the upload service needs, in the presign and finalize
// functions alike.
type Service struct {
	// Table is the idempotency table (TABLE_NAME, required).
	Table string
	// IdempotencyTTL is how long a key is kept (IDEMPOTENCY_TTL, default
	// 24h): the record store's TTL, which the service takes from it.
	IdempotencyTTL time.Duration
	// S3ForcePathStyle addresses the bucket in the URL's path rather than
	// its host name, for local S3 servers (S3_FORCE_PATH_STYLE, default
	// false).
	S3ForcePathStyle bool
	// Upload is the upload service's configuration.
	Upload Upload
	// MetricsNamespace is the CloudWatch namespace of the functions'
	// metrics (METRICS_NAMESPACE, default "onceupload").
	MetricsNamespace string
	// Warnings are settings that work but may surprise; wiring logs them.
	Warnings []string
}

// Upload is what a deployment decides for the upload service, which takes
// it as it is (upload.Config is this type), so that the settings have one
// definition and this package links no service or SDK client.
type Upload struct {
	// Bucket receives the uploads (BUCKET_NAME, required).
	Bucket string
	// Prefix starts every object key; finalize ignores objects outside it
	// (UPLOAD_PREFIX, default "uploads/").
	Prefix string
	// PresignTTL is the lifetime of a presigned URL; no URL outlives its
	// claim, whatever this says, and a claim lives the store's TTL
	// (PRESIGN_TTL, default 15m, at most 7 days).
	PresignTTL time.Duration
	// AbortIncompleteAfter is the bucket's lifecycle rule: how long after
	// it began S3 aborts an unfinished multipart upload
	// (ABORT_INCOMPLETE_DAYS, in whole days; default a day past
	// IDEMPOTENCY_TTL). Zero is a bucket without the rule: no multipart
	// upload is taken for aborted by its age.
	AbortIncompleteAfter time.Duration
	// MaxUploadBytes is the largest size accepted (MAX_UPLOAD_BYTES,
	// default 53687091200000, S3's largest object; a single PUT is capped
	// at 5 GiB whatever the setting).
	MaxUploadBytes int64
	// MaxPendingMultipart caps each tenant's multipart uploads that are
	// neither completed, aborted nor expired: a create past it fails with
	// upload.ErrTooManyUploads. 0 sets no cap. With a cap, the store must
	// be a recordstore.GroupCounter on a table with the group index
	// (MAX_PENDING_MULTIPART_PER_TENANT, default 100).
	MaxPendingMultipart int
	// AllowedContentTypes are lower-case media types ("image/png") or
	// wildcards ("image/*"); empty allows any valid type
	// (ALLOWED_CONTENT_TYPES, a comma list).
	AllowedContentTypes []string
}

// Allows reports whether AllowedContentTypes lets mediaType (lower case,
// without parameters) through.
func (u *Upload) Allows(mediaType string) bool {
	if len(u.AllowedContentTypes) == 0 {
		return true
	}
	typ, _, _ := strings.Cut(mediaType, "/")
	for _, allowed := range u.AllowedContentTypes {
		if allowed == mediaType || allowed == typ+"/*" || allowed == "*/*" {
			return true
		}
	}
	return false
}

// Events is the events function's section.
type Events struct {
	// Bucket is the upload bucket, which the events name (BUCKET_NAME,
	// required).
	Bucket string
	// Bus is the event bus's name or ARN (EVENT_BUS_NAME, default
	// "default": the account's).
	Bus string
	// Source is the events' source (EVENT_SOURCE, default api.EventSource;
	// AWS keeps sources starting with "aws." for itself).
	Source string
}

// LoadPresign reads the presign function's section through lookup
// (os.LookupEnv in main), returning every problem found, not just the
// first.
func LoadPresign(lookup func(string) (string, bool)) (Presign, error) {
	r := reader{lookup: lookup}
	c := Presign{Service: r.service()}
	c.AllowAnonymous = r.boolean("ALLOW_ANONYMOUS")
	return result(c, &r)
}

// LoadFinalize reads the finalize function's section, as LoadPresign.
func LoadFinalize(lookup func(string) (string, bool)) (Finalize, error) {
	r := reader{lookup: lookup}
	return result(Finalize{Service: r.service()}, &r)
}

// LoadEvents reads the events function's section, as LoadPresign: the
// bucket the events name, and where they go.
func LoadEvents(lookup func(string) (string, bool)) (Events, error) {
	r := reader{lookup: lookup}
	c := Events{Bucket: r.required("BUCKET_NAME"), Bus: r.get("EVENT_BUS_NAME", "default"), Source: r.get("EVENT_SOURCE", api.EventSource)}
	if strings.HasPrefix(c.Source, "aws.") {
		r.fail("EVENT_SOURCE=%q: sources starting with \"aws.\" are AWS's own", c.Source)
	}
	return result(c, &r)
}

// result is c, or the zero section and every problem r found.
func result[T any](c T, r *reader) (T, error) {
	if len(r.errs) > 0 {
		var zero T
		return zero, fmt.Errorf("invalid configuration: %w", errors.Join(r.errs...))
	}
	return c, nil
}

// reader reads variables, each with its default, and keeps every problem.
type reader struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (r *reader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// get is the variable's value, trimmed, or def if it is unset or blank.
func (r *reader) get(name, def string) string {
	if v, ok := r.lookup(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

func (r *reader) required(name string) string {
	v := r.get(name, "")
	if v == "" {
		r.fail("%s is required", name)
	}
	return v
}

func (r *reader) duration(name, def string) time.Duration {
	v := r.get(name, def)
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail("%s=%q: want a positive Go duration such as %s", name, v, def)
	}
	return d
}

// boolean reads a switch that is off unless set.
func (r *reader) boolean(name string) bool {
	v := r.get(name, "false")
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail("%s=%q: want true or false", name, v)
	}
	return b
}

// service reads the upload service's settings.
func (r *reader) service() Service {
	c := Service{
		MetricsNamespace: r.get("METRICS_NAMESPACE", "onceupload"),
		Table:            r.required("TABLE_NAME"),
		IdempotencyTTL:   r.duration("IDEMPOTENCY_TTL", "24h"),
		S3ForcePathStyle: r.boolean("S3_FORCE_PATH_STYLE"),
		Upload: Upload{
			Bucket:     r.required("BUCKET_NAME"),
			Prefix:     r.get("UPLOAD_PREFIX", "uploads/"),
			PresignTTL: r.duration("PRESIGN_TTL", "15m"),
		},
	}
	u := &c.Upload
	if p := u.Prefix; !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/") {
		r.fail("UPLOAD_PREFIX=%q: want a prefix such as uploads/ (ending in /, not starting with /)", p)
	}
	if u.PresignTTL > c.IdempotencyTTL && c.IdempotencyTTL > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("PRESIGN_TTL=%s is longer than IDEMPOTENCY_TTL=%s: every URL expires with its claim, so URLs last at most %s",
			u.PresignTTL, c.IdempotencyTTL, c.IdempotencyTTL))
	}
	if u.PresignTTL > 7*24*time.Hour {
		r.fail("PRESIGN_TTL=%s: SigV4 presigned URLs last at most 7 days", u.PresignTTL)
	}

	maxBytes := r.get("MAX_UPLOAD_BYTES", strconv.FormatInt(api.MaxMultipartBytes, 10))
	n, err := strconv.ParseInt(maxBytes, 10, 64)
	if err != nil || n < 1 || n > api.MaxMultipartBytes {
		r.fail("MAX_UPLOAD_BYTES=%q: want a whole number from 1 to %d (10,000 parts of 5 GiB)", maxBytes, int64(api.MaxMultipartBytes))
	}
	u.MaxUploadBytes = n

	for _, t := range strings.Split(r.get("ALLOWED_CONTENT_TYPES", ""), ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		typ, sub, ok := strings.Cut(t, "/")
		if !ok || typ == "" || sub == "" || strings.ContainsAny(sub, "/;") || typ == "*" && sub != "*" {
			r.fail("ALLOWED_CONTENT_TYPES: %q is not a type/subtype or type/*", t)
			continue
		}
		u.AllowedContentTypes = append(u.AllowedContentTypes, t)
	}

	// Each tenant's multipart uploads that are neither completed, aborted
	// nor expired; 0 sets no cap (and then no create counts them).
	pendingMax := r.get("MAX_PENDING_MULTIPART_PER_TENANT", strconv.Itoa(DefaultMaxPendingMultipart))
	if n, err := strconv.Atoi(pendingMax); err != nil || n < 0 || n > MaxPendingMultipartCap {
		r.fail("MAX_PENDING_MULTIPART_PER_TENANT=%q: want a whole number from 0 (no cap) to %d", pendingMax, MaxPendingMultipartCap)
	} else {
		u.MaxPendingMultipart = n
	}

	// The bucket aborts unfinished multipart uploads this many days after
	// they start. It must not undercut a key's window: an upload left
	// alone keeps its record IDEMPOTENCY_TTL, and S3 must not abort it
	// first. Past that, it is how long an upload whose key expired (DELETE
	// answers 404 then) keeps its parts in S3, so the default is the least
	// whole number of days that covers IDEMPOTENCY_TTL, plus one: a day for
	// an active upload (which signing keeps alive) to finish in.
	minDays := max(1, int((c.IdempotencyTTL+24*time.Hour-1)/(24*time.Hour)))
	days := r.get("ABORT_INCOMPLETE_DAYS", strconv.Itoa(minDays+1))
	if d, err := strconv.Atoi(days); err != nil || d < 1 {
		r.fail("ABORT_INCOMPLETE_DAYS=%q: want a whole number of days, at least 1", days)
	} else if limit := time.Duration(d) * 24 * time.Hour; c.IdempotencyTTL > limit {
		r.fail("IDEMPOTENCY_TTL=%s is longer than the bucket keeps unfinished multipart uploads (ABORT_INCOMPLETE_DAYS=%d): raise ABORT_INCOMPLETE_DAYS to at least %d (%d leaves an active upload a day more)",
			c.IdempotencyTTL, d, minDays, minDays+1)
	} else {
		u.AbortIncompleteAfter = limit
	}
	return c
}
