// Package awslite sends the few DynamoDB and S3 calls this project makes
// without the AWS SDK's service clients, but with the SDK's own parts for
// everything that is not the wire format: its SigV4 signer, its credential
// providers and cache, its standard retryer (backoff, retry quota, which
// errors are retryable) and its error interfaces, so callers classify
// errors as they would the SDK's.
//
// Why: the generated service clients are most of a Lambda function's
// binary. DynamoDB's schema tables and S3's endpoint rules made each
// bootstrap about 9 MB; the same functions on this package are under
// 7 MB, and a create makes fewer allocations. What is left out, on
// purpose: endpoint rules beyond the standard regional endpoints (set
// Options.BaseEndpoint for FIPS, dual-stack or other partitions), clock
// skew correction, and every operation the project does not call.
package awslite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Options adjust a client made from an aws.Config.
type Options struct {
	// BaseEndpoint replaces the service's regional endpoint, as the SDK's
	// option of the same name does (a local server, a FIPS endpoint).
	// Defaults to aws.Config.BaseEndpoint, else the regional endpoint.
	BaseEndpoint string
	// OnAttempt, if set, is called before each attempt is sent, retries
	// included, with the service ("DynamoDB", "S3") and the operation.
	OnAttempt func(ctx context.Context, service, operation string)
	// UsePathStyle addresses S3 buckets in the path rather than the host
	// name (S3 only).
	UsePathStyle bool
}

// maxResponseBytes bounds a response read into memory. The largest this
// project reads are a ListParts page of 1,000 parts and a 400 KB item.
const maxResponseBytes = 16 << 20

// client is what the DynamoDB and S3 clients share: one endpoint, signed
// requests, and the SDK's retry loop.
type client struct {
	service     string // the SDK's service id: "DynamoDB", "S3"
	signingName string // "dynamodb", "s3"
	region      string
	endpoint    url.URL
	creds       aws.CredentialsProvider
	http        aws.HTTPClient
	retryer     aws.Retryer
	signer      *v4.Signer
	onAttempt   func(ctx context.Context, service, operation string)
	// tokenEachAttempt asks the retryer for an attempt token before every
	// attempt. The standard retryer wants one for the first attempt only,
	// which it tells from the SDK's private context metadata; adaptive mode
	// and retryers of the caller's own are asked every time.
	tokenEachAttempt bool
}

func newClient(cfg aws.Config, service, signingName string, retryOpts func(*retry.StandardOptions), o Options) (*client, error) {
	if cfg.Region == "" {
		return nil, fmt.Errorf("%s: no region", service)
	}
	base := o.BaseEndpoint
	if base == "" && cfg.BaseEndpoint != nil {
		base = *cfg.BaseEndpoint
	}
	if base == "" {
		base = "https://" + signingName + "." + cfg.Region + "." + dnsSuffix(cfg.Region)
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%s: invalid endpoint %q", service, base)
	}
	c := &client{
		service: service, signingName: signingName, region: cfg.Region, endpoint: *u,
		creds: cfg.Credentials, http: cfg.HTTPClient, onAttempt: o.OnAttempt,
		signer: v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = signingName == "s3" }),
	}
	c.endpoint.Path = strings.TrimSuffix(c.endpoint.Path, "/")
	if c.http == nil {
		c.http = awshttp.NewBuildableClient() // the SDK clients' default
	}
	if c.creds == nil {
		c.creds = noCredentials{}
	}
	standard := func(so *retry.StandardOptions) {
		if retryOpts != nil {
			retryOpts(so)
		}
	}
	switch {
	case cfg.Retryer != nil:
		c.retryer, c.tokenEachAttempt = cfg.Retryer(), true
	case cfg.RetryMode == aws.RetryModeAdaptive:
		c.retryer = retry.NewAdaptiveMode(func(ao *retry.AdaptiveModeOptions) {
			ao.StandardOptions = append(ao.StandardOptions, standard)
		})
		c.tokenEachAttempt = true
	default:
		c.retryer = retry.NewStandard(standard)
	}
	if cfg.RetryMaxAttempts > 0 {
		c.retryer = retry.AddWithMaxAttempts(c.retryer, cfg.RetryMaxAttempts)
	}
	return c, nil
}

// dnsSuffix is the DNS suffix of region's partition, as the SDK's
// partition table has it for the partitions Lambda runs in.
func dnsSuffix(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "amazonaws.com.cn"
	case strings.HasPrefix(region, "us-isob-"):
		return "sc2s.sgov.gov"
	case strings.HasPrefix(region, "us-iso-"):
		return "c2s.ic.gov"
	case strings.HasPrefix(region, "us-isof-"):
		return "csp.hci.ic.gov"
	case strings.HasPrefix(region, "eu-isoe-"):
		return "cloud.adc-e.uk"
	case strings.HasPrefix(region, "eusc-"):
		return "amazonaws.eu"
	default:
		return "amazonaws.com"
	}
}

// call is one operation: the request it sends on each attempt and how its
// answer is judged.
type call struct {
	op     string
	method string
	url    url.URL
	header http.Header
	body   []byte
	// payloadHash is the body's SHA-256 in hex, which the signature covers;
	// do sets it once for every attempt.
	payloadHash string
	// failed returns the error of a response, or nil if it succeeded; it
	// is not called for statuses the SDK would treat as errors
	// (errorResponse handles those).
	failed func(resp *http.Response, body []byte) error
	// errorResponse turns a non-2xx response into an error.
	errorResponse func(resp *http.Response, body []byte) error
}

// response is a call's successful answer, its body read in full.
type response struct {
	header http.Header
	body   []byte
}

// do sends c with the SDK's retry loop: an attempt token, the retryer's
// judgement of each error, a retry token from its quota, and its backoff.
func (c *client) do(ctx context.Context, cl *call) (*response, error) {
	sum := sha256.Sum256(cl.body)
	cl.payloadHash = hex.EncodeToString(sum[:])
	maxAttempts := c.retryer.MaxAttempts()
	releaseRetry := func(error) error { return nil }
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, c.opError(cl.op, &aws.RequestCanceledError{Err: err})
		}
		releaseAttempt := func(error) error { return nil }
		if attempt == 1 || c.tokenEachAttempt {
			var err error
			if releaseAttempt, err = c.attemptToken(ctx); err != nil {
				return nil, c.opError(cl.op, fmt.Errorf("get retry send token: %w", err))
			}
		}
		resp, err := c.attempt(ctx, cl)
		_ = releaseRetry(err)
		_ = releaseAttempt(err)
		if err == nil {
			return resp, nil
		}
		if !c.retryer.IsErrorRetryable(err) {
			return nil, c.opError(cl.op, err)
		}
		if maxAttempts > 0 && attempt >= maxAttempts {
			return nil, c.opError(cl.op, &retry.MaxAttemptsError{Attempt: attempt, Err: err})
		}
		// err stays the attempt's error: the retryer's backoff depends on
		// it (a throttle backs off from a longer base), and so do callers'
		// judgements if the retry quota runs out.
		rel, terr := c.retryer.GetRetryToken(ctx, err)
		if terr != nil {
			return nil, c.opError(cl.op, errors.Join(err, terr))
		}
		releaseRetry = rel
		delay, derr := c.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return nil, c.opError(cl.op, errors.Join(err, derr))
		}
		delay = retryAfter(delay, err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, c.opError(cl.op, &aws.RequestCanceledError{Err: ctx.Err()})
		case <-t.C:
		}
	}
}

// retryAfter stretches a backoff to the service's X-Amz-Retry-After (in
// milliseconds), within [backoff, backoff+5s], as the SDK's retry loop does.
func retryAfter(backoff time.Duration, err error) time.Duration {
	var e *Error
	if !errors.As(err, &e) || e.RetryAfter <= 0 {
		return backoff
	}
	return min(max(e.RetryAfter, backoff), backoff+5*time.Second)
}

func (c *client) attemptToken(ctx context.Context) (func(error) error, error) {
	if r, ok := c.retryer.(aws.RetryerV2); ok {
		return r.GetAttemptToken(ctx)
	}
	return c.retryer.GetInitialToken(), nil //nolint:staticcheck // the V1 interface's only way
}

func (c *client) opError(op string, err error) error {
	return &smithy.OperationError{ServiceID: c.service, OperationName: op, Err: err}
}

// attempt signs and sends one request and reads its answer.
func (c *client) attempt(ctx context.Context, cl *call) (*response, error) {
	u := cl.url // RawPath exactly as built: what is sent is what is signed
	req := (&http.Request{Method: cl.method, URL: &u, Host: u.Host, Header: cl.header.Clone()}).WithContext(ctx)
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if len(cl.body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(cl.body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(cl.body)), nil }
	}
	req.ContentLength = int64(len(cl.body))
	if c.signingName == "s3" { // S3 wants the signed payload hash sent too
		req.Header.Set("X-Amz-Content-Sha256", cl.payloadHash)
	}
	req.Header.Set("User-Agent", "onceupload-awslite")
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("retrieve credentials: %w", err)
	}
	if err := c.signer.SignHTTP(ctx, creds, req, cl.payloadHash, c.signingName, c.region, time.Now()); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	if c.onAttempt != nil {
		c.onAttempt(ctx, c.service, cl.op)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &aws.RequestCanceledError{Err: err}
		}
		return nil, &smithyhttp.RequestSendError{Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, &aws.RequestCanceledError{Err: err}
	case err != nil:
		// A body cut short is a broken connection: retryable.
		return nil, &smithyhttp.RequestSendError{Err: fmt.Errorf("read response: %w", err)}
	case len(body) > maxResponseBytes:
		return nil, fmt.Errorf("response larger than %d bytes", maxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, withResponse(cl.errorResponse(resp, body), resp)
	}
	if cl.failed != nil {
		if err := cl.failed(resp, body); err != nil {
			return nil, withResponse(err, resp)
		}
	}
	return &response{header: resp.Header, body: body}, nil
}

// Error is a service's error answer. It satisfies smithy.APIError and
// carries the HTTP status the SDK's retryer looks at, so code written for
// the SDK's errors classifies it alike.
type Error struct {
	StatusCode int
	Code       string
	Message    string
	RequestID  string
	// Body is the response body, for errors that carry data (DynamoDB's
	// conditional check failure with the item it found).
	Body []byte
	// RetryAfter is the service's X-Amz-Retry-After, if it sent one.
	RetryAfter time.Duration
}

// withResponse completes an error answer with what the response's headers
// say, and marks a 429 that carries no known code as retryable, as the
// SDK's retryer does for a 429 it could not match to a modeled error.
func withResponse(err error, resp *http.Response) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if ms, perr := strconv.ParseInt(resp.Header.Get("X-Amz-Retry-After"), 10, 64); perr == nil && ms > 0 {
		e.RetryAfter = time.Duration(ms) * time.Millisecond
	}
	if e.StatusCode == http.StatusTooManyRequests {
		if _, throttle := retry.DefaultThrottleErrorCodes[e.Code]; !throttle {
			return &tooManyRequests{err: e}
		}
	}
	return err
}

// tooManyRequests is a 429 without a code the retryer knows.
type tooManyRequests struct{ err *Error }

func (e *tooManyRequests) Error() string        { return e.err.Error() }
func (e *tooManyRequests) Unwrap() error        { return e.err }
func (e *tooManyRequests) RetryableError() bool { return true }

func (e *Error) Error() string {
	msg := fmt.Sprintf("api error %s: %s (HTTP %d", e.Code, e.Message, e.StatusCode)
	if e.RequestID != "" {
		msg += ", request id " + e.RequestID
	}
	return msg + ")"
}

// ErrorCode returns the service's error code.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorMessage returns the service's message.
func (e *Error) ErrorMessage() string { return e.Message }

// ErrorFault says whether the server (5xx) or the caller is at fault.
func (e *Error) ErrorFault() smithy.ErrorFault {
	if e.StatusCode >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

// HTTPStatusCode returns the response's status, which the SDK's retryer
// reads (500, 502, 503 and 504 are retryable).
func (e *Error) HTTPStatusCode() int { return e.StatusCode }

// checksumError is a response whose body does not match its checksum: a
// corrupted transfer. The SDK only logs a DynamoDB CRC32 mismatch; this
// client retries it, which is safe for every call here (a repeated
// conditional write meets its own claim, see idempotency.judgeHolder).
type checksumError struct{ msg string }

func (e *checksumError) Error() string        { return e.msg }
func (e *checksumError) RetryableError() bool { return true }

var _ smithy.APIError = (*Error)(nil)

// errNoCredentials is returned by a client made without credentials.
var errNoCredentials = errors.New("no credentials provider")

type noCredentials struct{}

func (noCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errNoCredentials
}
