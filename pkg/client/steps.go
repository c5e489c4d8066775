package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/onceupload/onceupload/pkg/api"
)

// This file holds the steps of a single-PUT upload, one request each (with
// its retries): Create, Put, Status and Wait. Upload (upload.go) chains
// them; multipart.go has the steps of an upload in parts.

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
	resp, body, err := c.do(ctx, toAPI, "create", func() (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, c.base.String()+"/uploads", bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		return r, nil // doUntil sets the token
	})
	if err != nil {
		return nil, err
	}
	out := &Created{Replayed: resp.Header.Get("Idempotent-Replay") == "true"}
	if err := json.Unmarshal(body, &out.Upload); err != nil {
		return nil, unreadable("create", resp, body, err)
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
	case !strings.EqualFold(u.SHA256, req.SHA256) && (req.SHA256 != "" || req.PartSize == 0):
		// An upload in parts created without one may carry the sha256
		// its Complete declared.
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
	resp, body, err := c.do(ctx, toAPI, "status", func() (*http.Request, error) {
		r, err := http.NewRequest(http.MethodGet, c.base.String()+"/uploads/"+url.PathEscape(uploadID), nil)
		if err != nil {
			return nil, err
		}
		return r, nil // doUntil sets the token
	})
	if err != nil {
		return nil, err
	}
	var u api.Upload
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, unreadable("status", resp, body, err)
	}
	return &u, nil
}

// PutOptions tune a PUT.
type PutOptions struct {
	// Progress reports the bytes sent of each attempt.
	Progress func(sent, total int64)
	// RateLimit caps the sending rate in bytes per second; 0 is no limit.
	RateLimit int64
}

// PutOutcome is how a Put that returned no error ended: either way the
// upload's object is in S3, and the upload completes once the server has
// recorded it (Status or Wait tells).
type PutOutcome int

const (
	// PutStored: S3 took the bytes of this call (a 2xx).
	PutStored PutOutcome = iota + 1
	// PutAlreadyStored: S3 answered 412 PreconditionFailed to a PUT that
	// sent If-None-Match: * (the server signs it, so a URL only ever
	// creates its object): the object was there already, stored through
	// this upload's URL, which also signs the bytes' length and SHA-256 —
	// by an earlier attempt whose answer was lost, or by another PUT of
	// the same upload (another process with the same key) that won.
	PutAlreadyStored
)

func (o PutOutcome) String() string {
	switch o {
	case PutStored:
		return "stored"
	case PutAlreadyStored:
		return "already stored"
	}
	return fmt.Sprintf("PutOutcome(%d)", int(o))
}

// Put sends size bytes of body to the upload's presigned URL with the
// signed headers, retrying as any request. A URL that signs If-None-Match
// never overwrites, so a retry whose first attempt was stored (its answer
// lost) gets S3's 412: that is PutAlreadyStored, not an error; confirm with
// Status or Wait as after PutStored. A 403 usually means the URL expired:
// Upload then replays the create.
func (c *Client) Put(ctx context.Context, u *api.Upload, body io.ReaderAt, size int64, po PutOptions) (PutOutcome, error) {
	if u.Upload == nil {
		return 0, &Error{Op: "put", Message: "the upload has no PUT instructions (status " + u.Status + ")"}
	}
	createOnly := false
	for k, v := range u.Upload.Headers {
		if http.CanonicalHeaderKey(k) == "If-None-Match" && strings.TrimSpace(v) == "*" {
			createOnly = true
		}
	}
	stored := func(resp *http.Response) bool { return createOnly && resp.StatusCode == http.StatusPreconditionFailed }
	// One part's worth of the multipart tracker: a new attempt takes back
	// the bytes of the one before.
	var prog *partProgress
	if po.Progress != nil || po.RateLimit > 0 {
		prog = newPartProgress(size, 0, po.Progress, po.RateLimit)
	}
	resp, _, err := c.doUntil(ctx, toStorage, "put", stored, func() (*http.Request, error) {
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
	if err != nil {
		return 0, err
	}
	if stored(resp) {
		if prog != nil {
			prog.done(1, size) // all of it is in S3, whatever this attempt sent
		}
		c.opts.Logger.InfoContext(ctx, "the object is stored already (S3 answered 412 to If-None-Match)", "upload_id", u.UploadID)
		return PutAlreadyStored, nil
	}
	return PutStored, nil
}

// urlExpired reports whether S3 refused a PUT because its URL no longer
// works: 403 (the URL's own expiry), or 400 ExpiredToken (the session
// credentials that signed it expired first). A fresh URL cures both.
func urlExpired(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusForbidden || e.StatusCode == http.StatusBadRequest && e.Code == "ExpiredToken")
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
