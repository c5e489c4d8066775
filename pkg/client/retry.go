package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// Backoff returns how long to wait before retry number attempt (0 for the
// first retry), given a uniform random number in [0, 1).
type Backoff func(attempt int, base, maxDelay time.Duration, random float64) time.Duration

// FullJitter is AWS's "full jitter": random(0, min(cap, base·2^attempt)).
// It spreads retries of many clients evenly instead of in waves.
func FullJitter(attempt int, base, maxDelay time.Duration, random float64) time.Duration {
	ceiling := float64(base) * math.Pow(2, float64(attempt))
	if ceiling > float64(maxDelay) || math.IsInf(ceiling, 0) {
		ceiling = float64(maxDelay)
	}
	return time.Duration(random * ceiling)
}

// CheckRetry decides whether an attempt that ended in resp (its body
// already read into body) or err may be retried.
type CheckRetry func(resp *http.Response, body []byte, err error) bool

// DefaultCheckRetry retries what can succeed later: network errors (but
// not a certificate that fails verification, ErrCertificate) and
// timeouts, 408, 425, 429 (but not too_many_uploads), 500, 502, 503, 504,
// 409 with idempotency_in_progress, S3's 409 ConditionalRequestConflict
// (two PUTs of one upload raced; the retry is stored or finds the object
// stored) and S3's 400 RequestTimeout (an upload connection that stalled).
// Every other answer is final: retrying a 400 or a 422 cannot succeed, nor
// a 429 too_many_uploads, which waits for uploads to end, not for time.
func DefaultCheckRetry(resp *http.Response, body []byte, err error) bool {
	if err != nil {
		return retryableError(err)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return errorCode(body) != CodeTooManyUploads
	case http.StatusRequestTimeout, http.StatusTooEarly,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		code := errorCode(body)
		return code == "idempotency_in_progress" || code == s3ConditionalRequestConflict
	case http.StatusBadRequest:
		return errorCode(body) == "RequestTimeout"
	}
	return false
}

// CodeTooManyUploads is the API's 429 refusal to create an upload in parts
// (api.CodeTooManyUploads): the tenant holds as many unfinished multipart
// uploads as the server allows. It is never retried: a place frees only
// when one of them completes or is aborted. Nothing was created, so the
// create may be made again, with any key, once one has.
const CodeTooManyUploads = api.CodeTooManyUploads

// s3ConditionalRequestConflict is S3's 409 to a conditional write (a PUT
// with If-None-Match) that raced another write of the same key.
const s3ConditionalRequestConflict = "ConditionalRequestConflict"

// retryableError: the request may not have completed, so it may be sent
// again (every request this client sends is idempotent by its key or by
// S3's PUT semantics). Timeouts are retried: a response-header timeout, a
// dial or write "i/o timeout" all match context.DeadlineExceeded, and none
// is the caller's; the client checks the caller's own context before it
// asks this policy, and never retries once that has ended.
//
// A certificate that fails verification is not retried: it does not fix
// itself (ErrCertificate).
func retryableError(err error) bool {
	if transportFault("", nil, nil, err) == ErrCertificate {
		return false
	}
	// *url.Error, which wraps every transport failure, is a net.Error.
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// retryWait is the wait before retry number retry (0 for the first) of a
// request whose last attempt ended in resp (nil when no answer came): the
// server's Retry-After, capped at MaxRetryAfter, else the backoff.
func (c *Client) retryWait(retry int, resp *http.Response) time.Duration {
	if resp != nil {
		if ra, ok := retryAfter(resp.Header.Get("Retry-After"), c.opts.now()); ok {
			return min(ra, c.opts.MaxRetryAfter)
		}
	}
	return c.opts.Backoff(retry, c.opts.BaseDelay, c.opts.MaxDelay, c.opts.random())
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
// It returns false when absent or unreadable.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(h); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryReason says, for people, why the attempt that ended in fail is
// retried, naming its target: "no answer from the API (i/o timeout)", "S3 answered 503
// SlowDown". A failure without an answer names its innermost cause, never
// the URL (a presigned one carries its signature).
func retryReason(to target, fail *Error) string {
	who := to.who()
	if fail.StatusCode == 0 {
		if fail.Err == nil {
			return "no answer from " + who
		}
		return "no answer from " + who + " (" + brief(fail.Err) + ")"
	}
	if fail.NotOnceupload {
		return fmt.Sprintf("no answer from %s (something else answered %d %s)", who, fail.StatusCode, http.StatusText(fail.StatusCode))
	}
	what := fail.Code
	if what == "" {
		what = http.StatusText(fail.StatusCode)
	}
	if fail.Gateway {
		who = "API Gateway"
	}
	return strings.TrimSpace(fmt.Sprintf("%s answered %d %s", who, fail.StatusCode, what))
}
