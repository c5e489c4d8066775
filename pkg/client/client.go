package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// Options configure a Client.
type Options struct {
	// HTTPClient sends every request. Defaults to a client whose transport
	// gives up waiting for response headers after 60 seconds (no overall
	// timeout, which would cut large uploads).
	HTTPClient *http.Client
	// Token, if set, supplies the bearer token for the API's authorizer;
	// it is asked before every API request. When the API answers 401, the
	// client asks it once more, with FreshToken(ctx) true, and repeats
	// that request once, at once (a token that expired mid-upload); a
	// second 401 is final.
	Token func(ctx context.Context) (string, error)
	// MaxAttempts caps the attempts per request, the first one included;
	// 0 is no cap (RetryBudget bounds the retries). Defaults to
	// DefaultMaxAttempts (0).
	MaxAttempts int
	// RetryBudget bounds the retries of one request: retrying stops when the
	// next wait would end more than RetryBudget after the request's first
	// attempt ended. (From its end, not its start: a PUT that ran for ten
	// minutes before the network dropped still gets its retries.) 0 or less
	// is no budget. Defaults to DefaultRetryBudget.
	RetryBudget time.Duration
	// BaseDelay and MaxDelay shape the backoff. Default DefaultBaseDelay
	// and DefaultMaxDelay.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter caps how long a server's Retry-After may make the client
	// wait. Defaults to DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Deadline bounds a whole Upload or UploadReader call. Defaults to 1
	// hour; negative means none (the context still applies).
	Deadline time.Duration
	// Backoff defaults to FullJitter.
	Backoff Backoff
	// CheckRetry defaults to DefaultCheckRetry. It is not asked about a
	// failure that ends a request at once (see ErrNoSuchHost).
	CheckRetry CheckRetry
	// Logger receives a line per retry. Defaults to discarding them.
	Logger *slog.Logger
	// OnRetry, if set, is called before each wait for a retry: the
	// request (as Error.Op names it), the attempt that failed (1 for the
	// first), the wait, and why, for people ("no answer from the API (i/o
	// timeout)", "S3 answered 503 SlowDown"): a failure without an answer
	// names its innermost cause, never the URL. Parts are sent in
	// parallel, so it may be called from several goroutines at once.
	OnRetry func(op string, attempt int, wait time.Duration, reason string)

	// Injected in tests for exact delays.
	random func() float64
	sleep  func(ctx context.Context, d time.Duration) error
	now    func() time.Time
}

// The retry policy every onceupload client shares (the Go and TypeScript
// clients' tests both read it from pkg/api/testdata/retry-policy.json).
const (
	DefaultBaseDelay     = 250 * time.Millisecond
	DefaultMaxDelay      = 20 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
	DefaultRetryBudget   = 5 * time.Minute
	DefaultMaxAttempts   = 0
)

// Client talks to an onceupload API.
type Client struct {
	base *url.URL
	opts Options
	// answered: the API has answered once (its own answer or API
	// Gateway's), so a failure that waiting cannot fix before that (see
	// ErrNoSuchHost) is no longer taken for a wrong base URL.
	answered atomic.Bool
}

// New returns a client for the API at baseURL (for example
// https://abc123.execute-api.eu-west-1.amazonaws.com), in the form
// NormalizeBaseURL gives it: every spelling of one API sends the same
// requests (never //uploads), whatever slashes the server tolerates.
func New(baseURL string, optFns ...func(*Options)) (*Client, error) {
	norm, err := NormalizeBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(norm)
	if err != nil {
		return nil, fmt.Errorf("client: base URL %q: %w", baseURL, err)
	}
	o := Options{
		HTTPClient: &http.Client{Transport: NewTransport()}, MaxAttempts: DefaultMaxAttempts, RetryBudget: DefaultRetryBudget,
		BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay, MaxRetryAfter: DefaultMaxRetryAfter,
		Deadline: time.Hour, Backoff: FullJitter, CheckRetry: DefaultCheckRetry,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		random: rand.Float64, sleep: sleepCtx, now: time.Now,
	}
	for _, fn := range optFns {
		fn(&o)
	}
	o.MaxAttempts = max(o.MaxAttempts, 0)
	return &Client{base: u, opts: o}, nil
}

// NewKey mints an idempotency key: a random UUID. Mint one per logical
// upload, before the first attempt, and keep it for every retry.
func NewKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
