package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/onceupload/onceupload/pkg/api"
)

// This file is the upload in parts: its steps (SignParts, ListParts,
// Complete, Abort), one request each, and how Upload sends the parts.

// SignParts asks for presigned PUTs of parts of a multipart upload (at most
// api.MaxPartsPerSign at once). Signing changes nothing on the server, so
// it is retried like any request.
func (c *Client) SignParts(ctx context.Context, uploadID string, parts []api.PartToSign) ([]api.SignedPart, error) {
	payload, err := json.Marshal(api.SignPartsRequest{Parts: parts})
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	var out api.SignedParts
	if err := c.call(ctx, "sign", http.MethodPost, "/parts", uploadID, payload, &out); err != nil {
		return nil, err
	}
	// Every part asked for, and no other: a URL for another part would
	// store these bytes under the wrong number.
	want := make(map[int]bool, len(parts))
	for _, p := range parts {
		want[p.PartNumber] = true
	}
	for _, sp := range out.Parts {
		if !want[sp.PartNumber] || sp.URL == "" {
			return nil, &Error{Op: "sign", StatusCode: http.StatusOK, Code: CodeAnswerMismatch, Message: fmt.Sprintf("the answer signs part %d, which was not asked for", sp.PartNumber)}
		}
		delete(want, sp.PartNumber)
	}
	if len(want) > 0 {
		return nil, &Error{Op: "sign", StatusCode: http.StatusOK, Code: CodeAnswerMismatch, Message: fmt.Sprintf("the answer leaves out %d of the parts asked for", len(want))}
	}
	return out.Parts, nil
}

// ListParts returns the parts S3 holds of a multipart upload.
func (c *Client) ListParts(ctx context.Context, uploadID string) ([]api.StoredPart, error) {
	var out api.PartList
	if err := c.call(ctx, "list parts", http.MethodGet, "/parts", uploadID, nil, &out); err != nil {
		return nil, err
	}
	return out.Parts, nil
}

// Complete asks the server to assemble a multipart upload from the parts
// S3 holds. It is idempotent: a Complete whose answer was lost is retried
// and gets the same completed body. A part S3 lacks is an *Error with
// Code api.CodePartsMissing.
func (c *Client) Complete(ctx context.Context, uploadID string) (*api.Upload, error) {
	var u api.Upload
	if err := c.call(ctx, "complete", http.MethodPost, "/complete", uploadID, nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Abort gives up a pending multipart upload: S3 drops its parts, and the
// key answers "aborted" from then on.
func (c *Client) Abort(ctx context.Context, uploadID string) (*api.Upload, error) {
	var u api.Upload
	if err := c.call(ctx, "abort", http.MethodDelete, "", uploadID, nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// uploadParts is Upload for bytes in parts, read from r, once created (d
// has the whole and per-part SHA-256 from one pass): list what S3 holds if
// the key was known (replayed), send the rest, complete; parts that turn
// out missing at completion are sent and completion asked again.
func (c *Client) uploadParts(ctx context.Context, r io.ReaderAt, d *Digest, res *Result, replayed bool, in UploadInput) (*Result, error) {
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
	if res.PartsHeld > 0 && in.OnResume != nil {
		in.OnResume(res.PartsHeld, len(d.Parts), heldBytes, d.Size)
	}
	prog := newPartProgress(d.Size, heldBytes, in.Progress, in.RateLimit)
	parallel := in.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	for round := 0; ; round++ {
		if err := c.sendParts(ctx, id, r, d, todo, parallel, prog); err != nil {
			return nil, err
		}
		res.PartsSent += len(todo)
		if in.OnCompleting != nil {
			in.OnCompleting()
		}
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

// putPart sends part sp.PartNumber of d, read from body, to its presigned
// URL, retrying as any request (S3 part PUTs are idempotent). A 403 usually
// means the URL expired: sign the part again.
func (c *Client) putPart(ctx context.Context, sp api.SignedPart, body io.ReaderAt, d *Digest, prog *partProgress) error {
	n := sp.PartNumber
	if n < 1 || n > len(d.Parts) {
		return &Error{Op: "put part", Message: fmt.Sprintf("part %d is outside 1..%d", n, len(d.Parts))}
	}
	length := d.Length(n)
	_, _, err := c.do(ctx, fmt.Sprintf("put part %d", n), func() (*http.Request, error) {
		var r io.Reader = io.NewSectionReader(body, d.Offset(n), length)
		if prog != nil {
			r = prog.reader(ctx, n, r)
		}
		req, err := http.NewRequest(sp.Method, sp.URL, r)
		if err != nil {
			return nil, err
		}
		req.ContentLength = length
		for k, v := range sp.Headers {
			req.Header.Set(k, v)
		}
		return req, nil
	})
	if err == nil && prog != nil {
		prog.done(n, length)
	}
	return err
}

// sendParts sends the parts todo of d from f, parallel at a time: a signer
// signs them in batches of at most api.MaxPartsPerSign, each batch when the
// last one has been handed out, so URLs are fresh; workers PUT them. Each
// part is retried on its own; a part that fails for good stops the others
// and is the error.
func (c *Client) sendParts(ctx context.Context, uploadID string, f io.ReaderAt, d *Digest, todo []int, parallel int, prog *partProgress) error {
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	jobs := make(chan api.SignedPart)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(jobs)
		for _, batch := range batches(todo, api.MaxPartsPerSign) {
			signed, err := c.SignParts(ctx, uploadID, toSign(d, batch))
			if err != nil {
				fail(err)
				return
			}
			for _, sp := range signed {
				select {
				case jobs <- sp:
				case <-ctx.Done():
					fail(ctx.Err()) // never a nil error with parts unsent
					return
				}
			}
		}
	})
	for range max(1, min(parallel, len(todo))) {
		wg.Go(func() {
			for sp := range jobs {
				if err := c.sendPart(ctx, uploadID, f, d, sp, prog); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// sendPart PUTs one part; a refusal because its URL no longer works (see
// urlExpired) signs it again, at most twice.
func (c *Client) sendPart(ctx context.Context, uploadID string, f io.ReaderAt, d *Digest, sp api.SignedPart, prog *partProgress) error {
	for resigned := 0; ; resigned++ {
		err := c.putPart(ctx, sp, f, d, prog)
		if err == nil || !urlExpired(err) || resigned >= 2 {
			return err
		}
		c.opts.Logger.InfoContext(ctx, "signing a part again", "upload_id", uploadID, "part", sp.PartNumber)
		signed, err := c.SignParts(ctx, uploadID, toSign(d, []int{sp.PartNumber}))
		if err != nil {
			return err
		}
		sp = signed[0]
	}
}

func toSign(d *Digest, parts []int) []api.PartToSign {
	out := make([]api.PartToSign, len(parts))
	for i, n := range parts {
		out[i] = api.PartToSign{PartNumber: n, SHA256: d.Parts[n-1]}
	}
	return out
}
