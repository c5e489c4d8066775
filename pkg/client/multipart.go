package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

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

// call sends an API request about one upload and decodes the answer.
func (c *Client) call(ctx context.Context, op, method, suffix, uploadID string, payload []byte, out any) error {
	resp, body, err := c.do(ctx, op, func() (*http.Request, error) {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		r, err := http.NewRequest(method, c.base.String()+"/uploads/"+url.PathEscape(uploadID)+suffix, rd)
		if err != nil {
			return nil, err
		}
		if payload != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, c.authorize(ctx, r)
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Op: op, StatusCode: resp.StatusCode, Message: "unreadable response", Err: err}
	}
	return nil
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

// partProgress adds up the bytes of an upload in parts for one progress
// callback: the parts S3 acknowledged, plus what the attempts in flight
// have sent so far. A failed attempt's bytes are taken back, so the figure
// may step back, but never below what S3 acknowledged; it reaches the total
// only when every byte has been sent. It also paces the sending to a rate,
// shared by every part. Safe for concurrent use.
type partProgress struct {
	mu       sync.Mutex
	total    int64
	acked    int64
	inflight map[int]*attempt
	report   func(sent, total int64)
	rate     int64 // bytes per second, 0 for no limit
	start    time.Time
	paced    int64
}

type attempt struct{ sent int64 }

// newPartProgress returns a tracker of total bytes of which held are
// already stored; report (if not nil) gets every change, one call at a
// time; rate (bytes per second, 0 for none) caps the sending rate.
func newPartProgress(total, held int64, report func(sent, total int64), rate int64) *partProgress {
	p := &partProgress{total: total, acked: held, inflight: map[int]*attempt{}, report: report, rate: rate, start: time.Now()}
	if report != nil {
		report(held, total)
	}
	return p
}

// restart sets what S3 holds to held bytes, after a listing found parts
// missing that were thought stored.
func (p *partProgress) restart(held int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acked = held
	clear(p.inflight)
	p.notifyLocked()
}

func (p *partProgress) sentLocked() int64 {
	s := p.acked
	for _, a := range p.inflight {
		s += a.sent
	}
	return s
}

// reader counts what a new attempt of part n reads from r; the part's
// earlier attempt, if any, no longer counts.
func (p *partProgress) reader(ctx context.Context, n int, r io.Reader) io.Reader {
	a := &attempt{}
	p.mu.Lock()
	old := p.inflight[n]
	p.inflight[n] = a
	if old != nil && old.sent > 0 { // the failed attempt's bytes are taken back
		p.notifyLocked()
	}
	p.mu.Unlock()
	return &countingReader{ctx: ctx, r: r, p: p, part: n, a: a}
}

func (p *partProgress) add(n int, a *attempt, k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight[n] != a { // a stale attempt the transport still reads
		return
	}
	a.sent += int64(k)
	p.notifyLocked()
}

// done records part n, of length bytes, as acknowledged by S3.
func (p *partProgress) done(n int, length int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inflight, n)
	p.acked += length
	p.notifyLocked()
}

func (p *partProgress) notifyLocked() {
	if p.report != nil {
		p.report(p.sentLocked(), p.total)
	}
}

// pace returns how long to wait before sending k more bytes.
func (p *partProgress) pace(k int) time.Duration {
	if p.rate <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paced += int64(k)
	return time.Duration(float64(p.paced)/float64(p.rate)*float64(time.Second)) - time.Since(p.start)
}

type countingReader struct {
	r    io.Reader
	p    *partProgress
	part int
	a    *attempt
	ctx  context.Context
}

func (c *countingReader) Read(b []byte) (int, error) {
	if c.p.rate > 0 {
		if len(b) > int(c.p.rate/10)+1 {
			b = b[:c.p.rate/10+1] // about ten reads a second
		}
		if err := sleepCtx(c.ctx, c.p.pace(len(b))); err != nil {
			return 0, err
		}
	}
	n, err := c.r.Read(b)
	if n > 0 {
		c.p.add(c.part, c.a, n)
	}
	return n, err
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
