// Package config reads the functions' settings from environment variables,
// with defaults, and reports every invalid value at start-up.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/internal/upload"
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

// Config is everything a function needs besides AWS clients.
type Config struct {
	// Table is the idempotency table (TABLE_NAME, required).
	Table string
	// IdempotencyTTL is how long a key is kept (IDEMPOTENCY_TTL, default 24h).
	IdempotencyTTL time.Duration
	// AllowAnonymous lets requests without a principal act as the tenant
	// "anonymous" (ALLOW_ANONYMOUS, default false).
	AllowAnonymous bool
	// Upload holds BUCKET_NAME (required), UPLOAD_PREFIX (default
	// "uploads/"), PRESIGN_TTL (default 15m), MAX_UPLOAD_BYTES (default
	// 53687091200000, S3's largest object; a single PUT is capped at 5 GiB
	// whatever the setting), ALLOWED_CONTENT_TYPES (comma
	// list, "image/*" wildcards; empty allows any valid type),
	// MAX_PENDING_MULTIPART_PER_TENANT (default 100; 0 sets no cap) and
	// ABORT_INCOMPLETE_DAYS (default a day past IDEMPOTENCY_TTL, counted in
	// whole days).
	Upload upload.Config
	// MetricsNamespace is the CloudWatch namespace of the functions'
	// metrics (METRICS_NAMESPACE, default "onceupload").
	MetricsNamespace string
	// Warnings are settings that work but may surprise; main logs them.
	Warnings []string
}

// Load reads the configuration through lookup (os.LookupEnv in main). It
// returns every problem found, not just the first.
func Load(lookup func(string) (string, bool)) (Config, error) {
	var errs []error
	get := func(name, def string) string {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	required := func(name string) string {
		v := get(name, "")
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
		return v
	}
	duration := func(name, def string) time.Duration {
		v := get(name, def)
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive Go duration such as %s", name, v, def))
		}
		return d
	}

	c := Config{
		MetricsNamespace: get("METRICS_NAMESPACE", "onceupload"),
		Table:            required("TABLE_NAME"),
		IdempotencyTTL:   duration("IDEMPOTENCY_TTL", "24h"),
		Upload: upload.Config{
			Bucket:     required("BUCKET_NAME"),
			Prefix:     get("UPLOAD_PREFIX", "uploads/"),
			PresignTTL: duration("PRESIGN_TTL", "15m"),
		},
	}
	if p := c.Upload.Prefix; !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/") {
		errs = append(errs, fmt.Errorf("UPLOAD_PREFIX=%q: want a prefix such as uploads/ (ending in /, not starting with /)", p))
	}
	if c.Upload.PresignTTL > c.IdempotencyTTL && c.IdempotencyTTL > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("PRESIGN_TTL=%s is longer than IDEMPOTENCY_TTL=%s: every URL expires with its claim, so URLs last at most %s",
			c.Upload.PresignTTL, c.IdempotencyTTL, c.IdempotencyTTL))
	}
	if c.Upload.PresignTTL > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("PRESIGN_TTL=%s: SigV4 presigned URLs last at most 7 days", c.Upload.PresignTTL))
	}

	maxBytes := get("MAX_UPLOAD_BYTES", strconv.FormatInt(api.MaxMultipartBytes, 10))
	n, err := strconv.ParseInt(maxBytes, 10, 64)
	if err != nil || n < 1 || n > api.MaxMultipartBytes {
		errs = append(errs, fmt.Errorf("MAX_UPLOAD_BYTES=%q: want a whole number from 1 to %d (10,000 parts of 5 GiB)", maxBytes, int64(api.MaxMultipartBytes)))
	}
	c.Upload.MaxUploadBytes = n

	for _, t := range strings.Split(get("ALLOWED_CONTENT_TYPES", ""), ",") {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		typ, sub, ok := strings.Cut(t, "/")
		if !ok || typ == "" || sub == "" || strings.ContainsAny(sub, "/;") || typ == "*" && sub != "*" {
			errs = append(errs, fmt.Errorf("ALLOWED_CONTENT_TYPES: %q is not a type/subtype or type/*", t))
			continue
		}
		c.Upload.AllowedContentTypes = append(c.Upload.AllowedContentTypes, t)
	}

	// Each tenant's multipart uploads that are neither completed, aborted
	// nor expired; 0 sets no cap (and then no create counts them).
	pendingMax := get("MAX_PENDING_MULTIPART_PER_TENANT", strconv.Itoa(DefaultMaxPendingMultipart))
	if n, err := strconv.Atoi(pendingMax); err != nil || n < 0 || n > MaxPendingMultipartCap {
		errs = append(errs, fmt.Errorf("MAX_PENDING_MULTIPART_PER_TENANT=%q: want a whole number from 0 (no cap) to %d", pendingMax, MaxPendingMultipartCap))
	} else {
		c.Upload.MaxPendingMultipart = n
	}

	// The bucket aborts unfinished multipart uploads this many days after
	// they start. It must not undercut a key's window: an upload left
	// alone keeps its record IDEMPOTENCY_TTL, and S3 must not abort it
	// first. Past that, it is how long an upload whose key expired (DELETE
	// answers 404 then) keeps its parts in S3, so the default is the least
	// whole number of days that covers IDEMPOTENCY_TTL, plus one: a day for
	// an active upload (which signing keeps alive) to finish in.
	minDays := max(1, int((c.IdempotencyTTL+24*time.Hour-1)/(24*time.Hour)))
	days := get("ABORT_INCOMPLETE_DAYS", strconv.Itoa(minDays+1))
	if d, err := strconv.Atoi(days); err != nil || d < 1 {
		errs = append(errs, fmt.Errorf("ABORT_INCOMPLETE_DAYS=%q: want a whole number of days, at least 1", days))
	} else if limit := time.Duration(d) * 24 * time.Hour; c.IdempotencyTTL > limit {
		errs = append(errs, fmt.Errorf("IDEMPOTENCY_TTL=%s is longer than the bucket keeps unfinished multipart uploads (ABORT_INCOMPLETE_DAYS=%d): raise ABORT_INCOMPLETE_DAYS to at least %d (%d leaves an active upload a day more)",
			c.IdempotencyTTL, d, minDays, minDays+1))
	} else {
		c.Upload.AbortIncompleteAfter = limit
	}

	anon := get("ALLOW_ANONYMOUS", "false")
	c.AllowAnonymous, err = strconv.ParseBool(anon)
	if err != nil {
		errs = append(errs, fmt.Errorf("ALLOW_ANONYMOUS=%q: want true or false", anon))
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return c, nil
}
