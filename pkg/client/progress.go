package client

import (
	"context"
	"io"
	"sync"
	"time"
)

// This file counts the bytes sent, for UploadInput.Progress, and paces
// them, for RateLimit: the same for one PUT and for parts.

// partProgress adds up the bytes of an upload in parts for one progress
// callback: the parts S3 acknowledged, plus what the attempts in flight
// have sent so far. A failed attempt's bytes are taken back, so the figure
// may step back, but never below what S3 acknowledged; it reaches the total
// only when every byte has been sent. It also paces the sending to a rate,
// shared by every part. Safe for concurrent use.
type partProgress struct {
	mu         sync.Mutex
	total      int64
	acked      int64
	ackedParts int
	inflight   map[int]*attempt
	report     func(sent, total int64)
	stored     func(parts int, bytes int64) // UploadInput.OnStored
	rate       int64                        // bytes per second, 0 for no limit
	start      time.Time
	paced      int64
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

// onStored has stored told of what S3 holds, heldParts parts of the held
// bytes at first (if any), then each time S3 acknowledges a part.
func (p *partProgress) onStored(heldParts int, stored func(parts int, bytes int64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ackedParts, p.stored = heldParts, stored
	if stored != nil && heldParts > 0 {
		stored(heldParts, p.acked)
	}
}

// restart sets what S3 holds to heldParts parts of held bytes, after a
// listing found parts missing that were thought stored.
func (p *partProgress) restart(heldParts int, held int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acked, p.ackedParts = held, heldParts
	clear(p.inflight)
	p.notifyLocked()
	if p.stored != nil {
		p.stored(heldParts, held)
	}
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
	p.ackedParts++
	p.notifyLocked()
	if p.stored != nil {
		p.stored(p.ackedParts, p.acked)
	}
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
