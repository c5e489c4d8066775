package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// ErrMissingKey: the request carries no idempotency key (KeyPath resolves
// to nothing or to a value that names nothing, the request is nil, or Key
// returned ""), and HandlerOptions.OptionalKey is false.
var ErrMissingKey = errors.New("idempotency: request has no idempotency key")

// HandlerOptions configure [MakeIdempotent]. Req and Resp are the wrapped
// handler's request and response types.
//
// Paths (KeyPath, FingerprintPaths) are member paths into the JSON form of
// the request, as encoding/json encodes Req: member names and array
// indexes joined by dots, "body.orderId", "headers.Idempotency-Key",
// "items.0.sku". A segment names an object member (the exact name, else
// the one member that matches it ignoring case, since HTTP clients choose
// a header's case) or an array index.
//
// A string of the request that holds a JSON object or array, as API
// Gateway delivers a body, is embedded JSON: a path goes into it as into
// that value, and where a key or fingerprint takes it whole it counts as
// its canonical JSON, so its whitespace and member order never count. It
// still counts as a string: {"body":"[1]"} and {"body":[1]} are different
// requests. Strings within that JSON are its values and count as written
// ({"note":"[1, 2]"} in a body is not {"note":"[1,2]"}); a path decodes
// one only where it goes into it. Embedded JSON must be valid I-JSON (RFC
// 7493: UTF-8, no lone surrogate escape, no member name twice), or the
// string counts as written. A base64-encoded body is not decoded.
//
// Member paths are not JMESPath, which Powertools' paths are:
// powertools_json(body).orderId is body.orderId here, and
// headers."idempotency-key" is headers.idempotency-key. A path holding any
// of "'`()[]{}*?|&@!, or an empty segment, fails every request with an
// error that is not ErrMissingKey, even with OptionalKey.
type HandlerOptions[Req, Resp any] struct {
	// KeyPath is the path of the request's idempotency key. A string is the
	// key as it is; a number or boolean its JSON text; an object, an array
	// or embedded JSON (a whole body) its canonical JSON. A value that
	// names nothing is a missing key: null, an empty string, and an array
	// or object of nothing but nulls (none at all included), as JSON or as
	// embedded JSON; so is a nil request. Used when Key is nil. Defaults to
	// "": the whole request, canonicalized, is the key, as in Powertools
	// without an eventKeyJmesPath.
	KeyPath string
	// Key derives the idempotency key from the request, in place of
	// KeyPath. An empty key is a missing key. Defaults to nil.
	Key func(ctx context.Context, req Req) (string, error)
	// FingerprintPaths are the parts of the request a retry must repeat
	// exactly (canonically), or be refused with ErrKeyReused. Used when
	// Fingerprint is nil. Defaults to nil: the whole request. Set it for
	// events whose every delivery differs (API Gateway's requestContext
	// carries a request id and a time), or every retry is a reuse; for
	// example []string{"body"}.
	FingerprintPaths []string
	// Fingerprint derives the text a retry must repeat, in place of
	// FingerprintPaths; it is hashed before it is stored. Defaults to nil.
	Fingerprint func(ctx context.Context, req Req) (string, error)
	// Scope keeps apart the keys of functions that share a table: the same
	// key in two scopes is two records. Defaults to the value of
	// AWS_LAMBDA_FUNCTION_NAME when MakeIdempotent is called (empty outside
	// Lambda), as Powertools prefixes keys with the function name.
	Scope string
	// OptionalKey runs a request that has no key without idempotency.
	// Defaults to false: such a request fails with ErrMissingKey, because a
	// client that forgot its key would otherwise get no protection silently.
	OptionalKey bool
	// OnReplay, if not nil, is called with a response decoded from a record
	// and the record, and what it returns is returned, for example to mark
	// the response as replayed (Powertools' responseHook). Defaults to nil.
	OnReplay func(ctx context.Context, resp Resp, rec Record) Resp
	// UseLocalCache keeps this wrapped handler's completed records in the
	// process, as Powertools' useLocalCache does, so that a retry reaching
	// the same instance is answered without a store call. A record is
	// served from the cache only until its ExpiresAt (against Now) and only
	// to a request with its fingerprint; another request under its key gets
	// the *ConflictError the store would give. In-progress records are
	// never cached. A record deleted from the store behind the wrapper's
	// back is still replayed from the cache until it expires or is evicted.
	// Defaults to false.
	UseLocalCache bool
	// LocalCacheMaxItems bounds the local cache: past it, the least
	// recently used record is evicted. Defaults to
	// DefaultLocalCacheMaxItems when 0 or less.
	LocalCacheMaxItems int
	// Logger receives the wrapper's decisions (claimed, replayed, in
	// progress, reused, released) and the warning that
	// POWERTOOLS_IDEMPOTENCY_DISABLED is set. Defaults to slog.Default(),
	// as it is when MakeIdempotent is called.
	Logger *slog.Logger
	// Now is the clock the lease is computed with and a cached record's
	// expiry is checked against; give it the store's clock. Defaults to
	// time.Now.
	Now func() time.Time
	// AfterTimeout says what a retry gets when the key's earlier claim
	// timed out: its lease (the invocation's deadline) ran out with no
	// response recorded, because the invocation was cut off or its process
	// died. Defaults to TakeOverTimedOut.
	AfterTimeout TimeoutPolicy
}

// TimeoutPolicy is HandlerOptions.AfterTimeout: whether a handler whose
// earlier run timed out may run again.
type TimeoutPolicy int

const (
	// TakeOverTimedOut lets the next retry take the key over and run the
	// handler again, as Powertools does: right for work that is safe to
	// repeat, or that checks what an earlier run did.
	TakeOverTimedOut TimeoutPolicy = iota
	// BlockTimedOut refuses every retry with a *TimedOutError (ErrTimedOut:
	// the record's id and key, when it was claimed, when it timed out)
	// until the record expires (the store's Options.TTL) or the
	// application frees the key with ReleaseTimedOut: for work that must
	// not run twice, such as a payment or an email, whose first run may or
	// may not have happened. A handler that fails with
	// context.DeadlineExceeded once ctx's deadline has passed is taken as
	// timed out too, and its claim kept rather than released.
	BlockTimedOut
)

// cleanupTimeout bounds recording a result or releasing a claim after the
// handler returned: they run even when the invocation's context has ended,
// since a claim left in progress blocks its key until the lease runs out.
const cleanupTimeout = 10 * time.Second

// MakeIdempotent wraps fn so that a retried request is answered from the
// store instead of running fn again. For each request it:
//
//   - derives the key (Key, else KeyPath) and the fingerprint (Fingerprint,
//     else FingerprintPaths, else the whole request, canonicalized);
//   - with UseLocalCache, answers a retry from this wrapper's cache of
//     completed records, with no store call, while the record is live;
//   - claims the key in progress with one conditional write, for a lease of
//     the invocation's remaining time (ctx.Deadline()), or the store's
//     Options.Lease when ctx has no deadline;
//   - answers a retry with the same fingerprint from the record, the
//     JSON-encoded response decoded into Resp, without running fn;
//   - returns an *InProgressError (ErrInProgress, with RetryAfter) while
//     the first request runs, and a *ConflictError wrapping ErrKeyReused
//     for another fingerprint under the same key;
//   - runs fn, records its response as JSON, and returns it; when fn fails
//     (or panics) it releases the claim so that a retry runs fn again, and
//     returns fn's error.
//
// An expired record (the store's Options.TTL) counts as absent. A store
// that is unavailable when the response is to be recorded is asked again,
// with full-jitter backoff, until ctx's deadline (at most 10 s): fn has
// run, and a claim left in progress would let a later delivery run it
// again. If the response still cannot be recorded, the wrapper returns it
// together with an error: fn has run, but a retry may run it again.
//
// When POWERTOOLS_IDEMPOTENCY_DISABLED ([DisabledEnv]) is true, read on
// every request, the wrapper only runs fn: see [DisabledEnv].
//
// MakeIdempotent is a function that returns a function of fn's own type,
// rather than a Handler type with a method, so that the result goes
// wherever fn went (lambda.Start, a router, a test) and wrappers compose.
// The result is safe for concurrent use if fn and the store are.
func MakeIdempotent[Req, Resp any](store Store, fn func(context.Context, Req) (Resp, error), optFns ...func(*HandlerOptions[Req, Resp])) func(context.Context, Req) (Resp, error) {
	w := &wrapper[Req, Resp]{
		HandlerOptions: HandlerOptions[Req, Resp]{Scope: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), Logger: slog.Default(), Now: time.Now},
		store:          store, fn: fn,
	}
	for _, f := range optFns {
		f(&w.HandlerOptions)
	}
	if w.UseLocalCache {
		w.cache = newLocalCache(w.LocalCacheMaxItems)
	}
	return w.handle
}

// wrapper is one wrapped handler: its options, and the state it keeps
// across requests.
type wrapper[Req, Resp any] struct {
	HandlerOptions[Req, Resp]
	store Store
	fn    func(context.Context, Req) (Resp, error)
	// cache is nil unless UseLocalCache.
	cache *localCache
	// warnDisabled warns once that POWERTOOLS_IDEMPOTENCY_DISABLED is set.
	warnDisabled sync.Once
}

func (w *wrapper[Req, Resp]) handle(ctx context.Context, req Req) (resp Resp, err error) {
	off, err := disabled()
	if err != nil {
		return resp, err
	}
	if off {
		w.warnDisabled.Do(func() {
			w.Logger.WarnContext(ctx, "idempotency: "+DisabledEnv+" is set: every request runs the handler, with no idempotency; for tests and local runs, never in production")
		})
		return w.fn(ctx, req)
	}
	key, fingerprint, err := w.identify(ctx, req)
	if errors.Is(err, ErrMissingKey) && w.OptionalKey {
		w.Logger.DebugContext(ctx, "idempotency: no key, running without idempotency")
		return w.fn(ctx, req)
	}
	if err != nil {
		return resp, err
	}
	id := NewID(w.Scope, key)
	if cached, ok := w.cache.get(id, w.Now()); ok {
		if cached.Fingerprint != fingerprint {
			w.Logger.InfoContext(ctx, "idempotency: key reused", "id", id, "cached", true)
			return resp, &ConflictError{Err: ErrKeyReused, Existing: cached}
		}
		return w.replay(ctx, cached, true)
	}
	rec := Record{
		ID: id, Tenant: w.Scope, ClaimID: rand.Text(), Fingerprint: fingerprint,
		State: StateInProgress, Lease: w.lease(ctx), NoTakeover: w.AfterTimeout == BlockTimedOut,
	}
	res, err := w.store.Claim(ctx, rec)
	switch {
	case errors.Is(err, ErrTimedOut):
		w.refuseTimedOut(ctx, err, key)
		return resp, err
	case errors.Is(err, ErrInProgress):
		w.Logger.InfoContext(ctx, "idempotency: in progress", "id", rec.ID)
		return resp, err
	case errors.Is(err, ErrKeyReused):
		w.Logger.InfoContext(ctx, "idempotency: key reused", "id", rec.ID)
		return resp, err
	case err != nil:
		return resp, fmt.Errorf("idempotency: %w", err)
	case res.Replayed:
		w.cache.put(res.Record)
		return w.replay(ctx, res.Record, false)
	}
	w.Logger.DebugContext(ctx, "idempotency: claimed", "id", rec.ID, "claim", rec.ClaimID)

	release := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		err := w.store.Release(cctx, rec.ID, rec.ClaimID)
		if err != nil {
			w.Logger.WarnContext(ctx, "idempotency: release failed; the key stays blocked until its lease ends", "id", rec.ID, "error", err)
		} else {
			w.Logger.DebugContext(ctx, "idempotency: released", "id", rec.ID)
		}
		return err
	}
	panicked := true
	defer func() {
		if panicked {
			_ = release()
		}
	}()
	resp, err = w.fn(ctx, req)
	panicked = false
	if err != nil && w.AfterTimeout == BlockTimedOut && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Cut off, as a timeout would have: the work may have happened,
		// so the claim stays, to time out and refuse retries.
		w.Logger.WarnContext(ctx, "idempotency: the handler ran out of time; its claim is kept, so retries are refused", "id", rec.ID)
		return resp, err
	}
	if err != nil {
		if relErr := release(); relErr != nil {
			return resp, errors.Join(err, relErr)
		}
		return resp, err
	}
	body, err := json.Marshal(resp)
	if err != nil {
		err = fmt.Errorf("idempotency: encode the response of %s: %w", rec.ID, err)
		return resp, errors.Join(err, release())
	}
	done, err := w.recordResponse(ctx, rec, body)
	if err != nil {
		return resp, fmt.Errorf("idempotency: record the response of %s: %w", rec.ID, err)
	}
	w.cache.put(done)
	return resp, nil
}

// refuseTimedOut names key in err's *TimedOutError, which the store could
// not, and logs the refusal.
func (w *wrapper[Req, Resp]) refuseTimedOut(ctx context.Context, err error, key string) {
	var timedOut *TimedOutError
	if errors.As(err, &timedOut) {
		timedOut.Key = key
		w.Logger.WarnContext(ctx, "idempotency: an earlier claim timed out; refused until it expires or is released", "id", timedOut.Existing.ID,
			"claimed_at", timedOut.Existing.CreatedAt, "timed_out_at", timedOut.Existing.LeaseExpiresAt)
	}
}

// recordBackoff is the wait before asking an unavailable store again to
// record a response: the SDK's standard full jitter, from 50 ms doubling
// to at most a second (a second from the start for a throttle).
var recordBackoff = retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = time.Second })

// recordResponse completes rec's claim with body. fn has run by now, so giving up
// early is costly: the claim would stay in progress until its lease runs
// out, and the next delivery would run fn again. So a store that is
// unavailable (ErrUnavailable: the client's own quick retries are spent)
// is asked again after recordBackoff's wait, for as long as ctx's deadline
// and cleanupTimeout both allow; the first attempt is always made, even
// past the deadline. An attempt that finds the record completed by this
// very claim met its own earlier write, whose answer was lost: that is a
// success, not ErrAlreadyCompleted.
func (w *wrapper[Req, Resp]) recordResponse(ctx context.Context, rec Record, body []byte) (Record, error) {
	stop := time.Now().Add(cleanupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(stop) {
		stop = d
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		done, err := w.store.Complete(cctx, rec.ID, rec.ClaimID, Response{Body: body})
		var conflict *ConflictError
		switch {
		case err == nil:
			return done, nil
		case errors.As(err, &conflict) && errors.Is(err, ErrAlreadyCompleted) && conflict.Existing.ClaimID == rec.ClaimID:
			w.Logger.DebugContext(ctx, "idempotency: recorded by an earlier attempt whose answer was lost", "id", rec.ID, "attempts", attempt)
			return conflict.Existing, nil
		case !errors.Is(err, ErrUnavailable):
			return Record{}, err
		}
		wait, werr := recordBackoff.RetryDelay(attempt, err)
		if werr != nil || time.Now().Add(wait).After(stop) {
			return Record{}, fmt.Errorf("after %d attempts: %w", attempt, err)
		}
		w.Logger.WarnContext(ctx, "idempotency: store unavailable to record a response; asking again", "id", rec.ID, "attempt", attempt, "wait", wait, "error", err)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-cctx.Done():
			timer.Stop()
			return Record{}, fmt.Errorf("after %d attempts: %w", attempt, err)
		}
	}
}

// replay answers with rec's recorded response, from the store or, if
// cached, from the local cache.
func (w *wrapper[Req, Resp]) replay(ctx context.Context, rec Record, cached bool) (resp Resp, err error) {
	if err := json.Unmarshal(rec.Response.Body, &resp); err != nil {
		return resp, fmt.Errorf("idempotency: replay %s: decode recorded response: %w", rec.ID, err)
	}
	w.Logger.DebugContext(ctx, "idempotency: replayed", "id", rec.ID, "claim", rec.ClaimID, "cached", cached)
	if w.OnReplay != nil {
		if w.cache != nil {
			// The hook gets a body of its own: the cache's is shared.
			rec.Response.Body = bytes.Clone(rec.Response.Body)
		}
		resp = w.OnReplay(ctx, resp, rec)
	}
	return resp, nil
}

// lease is the invocation's remaining time, or 0 (the store's lease) when
// ctx has no deadline. A deadline already past still leases a millisecond,
// since a lease of 0 would mean the store's.
func (o *HandlerOptions[Req, Resp]) lease(ctx context.Context) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(deadline.Sub(o.Now()), time.Millisecond)
}

// identify returns the request's key and its fingerprint (SHA-256, hex).
func (o *HandlerOptions[Req, Resp]) identify(ctx context.Context, req Req) (key, fingerprint string, err error) {
	var doc any
	decoded := false
	document := func() (any, error) {
		if !decoded {
			raw, err := json.Marshal(req)
			if err != nil {
				return nil, fmt.Errorf("idempotency: encode the request: %w", err)
			}
			// Embedded bodies are decoded once, for the key and the
			// fingerprint both.
			if doc, err = decodeRequest(raw); err != nil {
				return nil, fmt.Errorf("idempotency: decode the request: %w", err)
			}
			decoded = true
		}
		return doc, nil
	}

	if o.Key != nil {
		if key, err = o.Key(ctx, req); err != nil {
			return "", "", fmt.Errorf("idempotency: key: %w", err)
		}
	} else {
		d, err := document()
		if err != nil {
			return "", "", err
		}
		if key, err = keyAt(d, o.KeyPath); err != nil {
			return "", "", err
		}
	}
	if key == "" {
		return "", "", ErrMissingKey
	}

	var text string
	switch {
	case o.Fingerprint != nil:
		if text, err = o.Fingerprint(ctx, req); err != nil {
			return "", "", fmt.Errorf("idempotency: fingerprint: %w", err)
		}
	default:
		d, err := document()
		if err != nil {
			return "", "", err
		}
		if text, err = fingerprintText(d, o.FingerprintPaths); err != nil {
			return "", "", err
		}
	}
	sum := sha256.Sum256([]byte(text))
	return key, hex.EncodeToString(sum[:]), nil
}
