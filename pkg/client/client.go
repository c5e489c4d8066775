package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// Options configure a Client.
type Options struct {
	// HTTPClient sends every request. Defaults to a client whose transport
	// gives up waiting for response headers after 60 seconds (no overall
	// timeout, which would cut large uploads).
	HTTPClient *http.Client
	// Token, if set, supplies the bearer token for the API's authorizer.
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
	// Deadline bounds a whole Upload call. Defaults to 1 hour; negative
	// means none (the context still applies).
	Deadline time.Duration
	// Backoff defaults to FullJitter.
	Backoff Backoff
	// CheckRetry defaults to DefaultCheckRetry.
	CheckRetry CheckRetry
	// Logger receives a line per retry. Defaults to discarding them.
	Logger *slog.Logger

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
}

// New returns a client for the API at baseURL (for example
// https://abc123.execute-api.eu-west-1.amazonaws.com).
func New(baseURL string, optFns ...func(*Options)) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[/path]", baseURL)
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

// NewTransport returns the transport of a Client's default HTTPClient, to
// change (a proxy, say) and pass back in Options.HTTPClient: it gives up
// waiting for response headers after 60 seconds, and keeps enough idle
// connections for the parts in flight.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = 16
	return t
}

// Error is a request that failed for good. Test with errors.As.
type Error struct {
	Op         string // "create", "status", "put", "sign", "put part N", "list parts", "complete", "abort"
	StatusCode int    // 0 when no response arrived
	Code       string // the API's error code, or S3's
	Message    string
	Attempts   int
	// Exhausted is true when the last failure could have been retried but
	// the attempts, the retry budget or the deadline ran out.
	Exhausted bool
	// Err is the transport or context error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.Op)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": %d", e.StatusCode)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Exhausted {
		fmt.Fprintf(&b, " (gave up after %d attempts)", e.Attempts)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

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

// do sends the request built by build, a new one per attempt so that its
// body starts over, and retries per the policy. It returns the successful
// response's body.
func (c *Client) do(ctx context.Context, op string, build func() (*http.Request, error)) (*http.Response, []byte, error) {
	var firstEnded time.Time
	for attempt := 1; ; attempt++ {
		req, err := build()
		if err != nil {
			return nil, nil, &Error{Op: op, Attempts: attempt, Err: err}
		}
		resp, err := c.opts.HTTPClient.Do(req.WithContext(ctx))
		var body []byte
		if err == nil {
			// Enough for the largest answer: a list of 10,000 parts.
			body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
		}
		if attempt == 1 {
			firstEnded = c.opts.now()
		}
		if err == nil && resp.StatusCode < 300 {
			return resp, body, nil
		}
		fail := &Error{Op: op, Attempts: attempt, Err: err}
		if err == nil {
			fail.StatusCode = resp.StatusCode
			fail.Code, fail.Message = describe(body)
		}
		if ctx.Err() != nil {
			fail.Err, fail.Exhausted = ctx.Err(), true
			return nil, nil, fail
		}
		if !c.opts.CheckRetry(resp, body, err) {
			return nil, nil, fail
		}
		if c.opts.MaxAttempts > 0 && attempt >= c.opts.MaxAttempts {
			fail.Exhausted = true
			return nil, nil, fail
		}
		wait := c.retryWait(attempt-1, resp)
		if c.opts.RetryBudget > 0 && c.opts.now().Add(wait).Sub(firstEnded) > c.opts.RetryBudget {
			fail.Exhausted = true
			return nil, nil, fail
		}
		c.opts.Logger.InfoContext(ctx, "retrying", "op", op, "attempt", attempt, "status", fail.StatusCode, "code", fail.Code, "error", err, "wait", wait)
		if err := c.opts.sleep(ctx, wait); err != nil {
			fail.Err, fail.Exhausted = err, true
			return nil, nil, fail
		}
	}
}

// describe reads an error body: the API's JSON, or S3's XML.
func describe(body []byte) (code, message string) {
	var e api.Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error, e.Message
	}
	var s3err struct{ Code, Message string }
	if xml.Unmarshal(body, &s3err) == nil {
		return s3err.Code, s3err.Message
	}
	return "", ""
}

func errorCode(body []byte) string {
	code, _ := describe(body)
	return code
}

// Created is the answer to a create.
type Created struct {
	Upload api.Upload
	// Replayed is true when the server answered from an earlier request
	// with the same key.
	Replayed bool
}

// Create asks for an upload, retrying with the same key.
func (c *Client) Create(ctx context.Context, key string, req api.CreateRequest) (*Created, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	resp, body, err := c.do(ctx, "create", func() (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, c.base.String()+"/uploads", bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		return r, c.authorize(ctx, r)
	})
	if err != nil {
		return nil, err
	}
	out := &Created{Replayed: resp.Header.Get("Idempotent-Replay") == "true"}
	if err := json.Unmarshal(body, &out.Upload); err != nil {
		return nil, &Error{Op: "create", StatusCode: resp.StatusCode, Message: "unreadable response", Err: err}
	}
	if field := mismatch(&out.Upload, req); field != "" {
		return nil, &Error{Op: "create", StatusCode: resp.StatusCode, Code: CodeAnswerMismatch,
			Message: "the answer is for another request (its " + field + " differs); a proxy or the server mixed up responses"}
	}
	return out, nil
}

// CodeAnswerMismatch is the Error.Code of a create whose answer describes
// another request. It is never retried: the same path may mix it up again,
// and sending bytes to another upload's URL must not happen.
const CodeAnswerMismatch = "answer_mismatch"

// mismatch names the first field in which u, an answer to req, differs from
// what the server echoes back for req; "" when it is req's.
func mismatch(u *api.Upload, req api.CreateRequest) string {
	switch {
	case u.Filename != req.Filename:
		return "filename"
	case u.ContentType != req.ContentType:
		return "contentType"
	case u.Bytes != req.Size:
		return "size"
	case !strings.EqualFold(u.SHA256, req.SHA256):
		return "sha256"
	case u.Multipart != nil && u.Multipart.PartSize != req.PartSize:
		return "partSize"
	case req.PartSize > 0 && u.Multipart == nil && u.Status == api.StatusPending:
		return "multipart"
	}
	return ""
}

// Status returns an upload's current state.
func (c *Client) Status(ctx context.Context, uploadID string) (*api.Upload, error) {
	resp, body, err := c.do(ctx, "status", func() (*http.Request, error) {
		r, err := http.NewRequest(http.MethodGet, c.base.String()+"/uploads/"+url.PathEscape(uploadID), nil)
		if err != nil {
			return nil, err
		}
		return r, c.authorize(ctx, r)
	})
	if err != nil {
		return nil, err
	}
	var u api.Upload
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, &Error{Op: "status", StatusCode: resp.StatusCode, Message: "unreadable response", Err: err}
	}
	return &u, nil
}

func (c *Client) authorize(ctx context.Context, r *http.Request) error {
	if c.opts.Token == nil {
		return nil
	}
	token, err := c.opts.Token(ctx)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	return nil
}

// PutOptions tune a PUT.
type PutOptions struct {
	// Progress reports the bytes sent of each attempt.
	Progress func(sent, total int64)
	// RateLimit caps the sending rate in bytes per second; 0 is no limit.
	RateLimit int64
}

// Put sends size bytes of body to the upload's presigned URL with the
// signed headers, retrying as any request (S3 PUTs are idempotent). A 403
// usually means the URL expired: Upload then replays the create.
func (c *Client) Put(ctx context.Context, u *api.Upload, body io.ReaderAt, size int64, po PutOptions) error {
	if u.Upload == nil {
		return &Error{Op: "put", Message: "the upload has no PUT instructions (status " + u.Status + ")"}
	}
	// One part's worth of the multipart tracker: a new attempt takes back
	// the bytes of the one before.
	var prog *partProgress
	if po.Progress != nil || po.RateLimit > 0 {
		prog = newPartProgress(size, 0, po.Progress, po.RateLimit)
	}
	_, _, err := c.do(ctx, "put", func() (*http.Request, error) {
		var r io.Reader = io.NewSectionReader(body, 0, size)
		if prog != nil {
			r = prog.reader(ctx, 1, r)
		}
		req, err := http.NewRequest(u.Upload.Method, u.Upload.URL, r)
		if err != nil {
			return nil, err
		}
		req.ContentLength = size
		for k, v := range u.Upload.Headers {
			req.Header.Set(k, v)
		}
		return req, nil
	})
	return err
}

// Wait polls the upload until it is completed, with the same backoff as
// retries, until ctx ends.
func (c *Client) Wait(ctx context.Context, uploadID string) (*api.Upload, error) {
	for poll := 0; ; poll++ {
		u, err := c.Status(ctx, uploadID)
		if err != nil {
			return nil, err
		}
		if u.Status == api.StatusCompleted {
			return u, nil
		}
		wait := max(c.opts.Backoff(poll, c.opts.BaseDelay, c.opts.MaxDelay, c.opts.random()), c.opts.BaseDelay/2)
		if err := c.opts.sleep(ctx, wait); err != nil {
			return nil, &Error{Op: "wait", Message: "upload not completed yet", Err: err, Exhausted: true, Attempts: poll + 1}
		}
	}
}

// Describe streams r once and returns its size and SHA-256 (hex), in
// constant memory whatever the size.
func Describe(r io.Reader) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return 0, "", fmt.Errorf("hash: %w", err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// UploadInput tunes Upload.
type UploadInput struct {
	// Key is the idempotency key. Defaults to a new one; pass a stored key
	// to resume an upload after a crash.
	Key string
	// ContentType defaults to the extension's type, else a sniffed one.
	ContentType string
	// Filename defaults to the file's base name.
	Filename string
	// PartSize makes the upload multipart, in parts of this many bytes
	// (api.MinPartSize to api.MaxPartSize, at most api.MaxParts parts). 0
	// picks PartSizeFor(size): parts from MultipartThreshold up, one PUT
	// below. Negative forces one PUT (S3 takes at most 5 GiB so). Resuming
	// needs the part size of the first attempt, which is part of what the
	// key stands for.
	PartSize int64
	// Parallel is how many parts are sent at once. Defaults to
	// DefaultParallel.
	Parallel int
	// Progress reports the bytes sent out of the total. For one PUT it is
	// the current attempt's bytes. For parts it is what S3 acknowledged
	// plus what the attempts in flight sent so far: it steps back when an
	// attempt fails, never below what S3 acknowledged, and is called one
	// call at a time. RateLimit caps the sending rate (bytes per second
	// over all parts, 0 for none).
	Progress  func(sent, total int64)
	RateLimit int64
	// OnCreated is called once the server holds the key, with the key and
	// the upload (for example to persist the key, upload id and part size
	// before sending bytes).
	OnCreated func(key string, u *api.Upload)
}

// Result is a finished upload.
type Result struct {
	Upload api.Upload
	Key    string
	// Replayed is true when the server already knew the key.
	Replayed bool
	// For an upload in parts: the parts S3 already held when this call
	// began (a resumed upload) and the parts this call sent.
	PartsHeld, PartsSent int
}

// CodeUploadAborted is the Error.Code of an Upload whose key belongs to an
// upload that was aborted: the key cannot store the file any more.
const CodeUploadAborted = "upload_aborted"

// Upload does the whole job for the file at path: size and SHA-256,
// create (one key for every attempt), PUT, wait for completion. A file of
// MultipartThreshold bytes or more goes up in parts, Parallel at a time;
// given the key of an unfinished upload in parts, it sends only the parts
// S3 lacks.
func (c *Client) Upload(ctx context.Context, path string, in UploadInput) (*Result, error) {
	if c.opts.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Deadline)
		defer cancel()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	partSize := in.PartSize
	if partSize == 0 {
		partSize = PartSizeFor(info.Size())
	}
	req := api.CreateRequest{Filename: in.Filename, ContentType: in.ContentType}
	if req.Filename == "" {
		req.Filename = filepath.Base(path)
	}
	if req.ContentType == "" {
		if req.ContentType, err = DetectContentType(f, path); err != nil {
			return nil, err
		}
	}
	key := in.Key
	if key == "" {
		key = NewKey()
	}
	if partSize > 0 {
		// Refused before the file is read: hashing it is the long part.
		if n := api.PartCount(info.Size(), partSize); n > api.MaxParts {
			return nil, fmt.Errorf("%s: %d parts of %d bytes; at most %d (use a larger part size)", path, n, partSize, api.MaxParts)
		}
		d, err := DescribeParts(f, partSize)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		req.Size, req.SHA256, req.PartSize = d.Size, d.SHA256, partSize
		res, created, err := c.create(ctx, key, req, in)
		if err != nil {
			return nil, err
		}
		return c.uploadParts(ctx, f, d, res, created.Replayed, in)
	}
	size, sum, err := Describe(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	req.Size, req.SHA256 = size, sum
	res, _, err := c.create(ctx, key, req, in)
	if err != nil {
		return nil, err
	}
	// An expired URL is refreshed by replaying the create with the same key.
	for refreshes := 0; res.Upload.Status == api.StatusPending; refreshes++ {
		err := c.Put(ctx, &res.Upload, f, size, PutOptions{Progress: in.Progress, RateLimit: in.RateLimit})
		if err == nil {
			break
		}
		if !urlExpired(err) || refreshes >= 2 {
			return nil, err
		}
		c.opts.Logger.InfoContext(ctx, "refreshing the upload URL", "upload_id", res.Upload.UploadID)
		created, err := c.Create(ctx, key, req)
		if err != nil {
			return nil, err
		}
		res.Upload = created.Upload
	}
	if res.Upload.Status != api.StatusCompleted {
		done, err := c.Wait(ctx, res.Upload.UploadID)
		if err != nil {
			return nil, err
		}
		res.Upload = *done
	}
	return res, nil
}

// create is Upload's create: the result it starts from, told to
// in.OnCreated.
func (c *Client) create(ctx context.Context, key string, req api.CreateRequest, in UploadInput) (*Result, *Created, error) {
	created, err := c.Create(ctx, key, req)
	if err != nil {
		return nil, nil, err
	}
	if in.OnCreated != nil {
		in.OnCreated(key, &created.Upload)
	}
	return &Result{Key: key, Replayed: created.Replayed, Upload: created.Upload}, created, nil
}

// uploadParts is Upload for a file in parts, once created (d has the
// whole-file and per-part SHA-256 from one pass): list what S3 holds if
// the key was known (replayed), send the rest, complete; parts that turn
// out missing at completion are sent and completion asked again.
func (c *Client) uploadParts(ctx context.Context, f *os.File, d *Digest, res *Result, replayed bool, in UploadInput) (*Result, error) {
	var err error
	switch res.Upload.Status {
	case api.StatusCompleted:
		return res, nil
	case api.StatusAborted:
		return nil, &Error{Op: "create", StatusCode: http.StatusCreated, Code: CodeUploadAborted,
			Message: "the upload with this key (" + res.Upload.UploadID + ") was aborted; upload with a new key"}
	}
	id := res.Upload.UploadID
	var held []api.StoredPart
	if replayed { // only a known key can have parts in S3
		if held, err = c.ListParts(ctx, id); err != nil {
			return nil, err
		}
	}
	todo, heldBytes := partsToSend(d, held)
	res.PartsHeld = len(d.Parts) - len(todo)
	prog := newPartProgress(d.Size, heldBytes, in.Progress, in.RateLimit)
	parallel := in.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	for round := 0; ; round++ {
		if err := c.sendParts(ctx, id, f, d, todo, parallel, prog); err != nil {
			return nil, err
		}
		res.PartsSent += len(todo)
		done, err := c.Complete(ctx, id)
		var e *Error
		if err != nil && errors.As(err, &e) && e.Code == api.CodePartsMissing && round < 2 {
			// S3 lost a part, or another process changed one: list
			// again and send what is missing.
			c.opts.Logger.InfoContext(ctx, "parts missing at completion", "upload_id", id, "message", e.Message)
			if held, err = c.ListParts(ctx, id); err != nil {
				return nil, err
			}
			var heldBytes int64
			todo, heldBytes = partsToSend(d, held)
			prog.restart(heldBytes)
			continue
		}
		if err != nil {
			return nil, err
		}
		res.Upload = *done
		return res, nil
	}
}

// urlExpired reports whether S3 refused a PUT because its URL no longer
// works: 403 (the URL's own expiry), or 400 ExpiredToken (the session
// credentials that signed it expired first). A fresh URL cures both.
func urlExpired(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusForbidden || e.StatusCode == http.StatusBadRequest && e.Code == "ExpiredToken")
}

// DetectContentType picks a media type from the file name's extension, else
// from its first 512 bytes.
func DetectContentType(f io.ReaderAt, name string) (string, error) {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t, nil
	}
	head := make([]byte, 512)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return http.DetectContentType(head[:n]), nil
}
