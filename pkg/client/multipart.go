package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

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
// S3 holds. req, if not nil, is its body: every part's SHA-256 (the server
// compares them with what S3 holds and completes with them) and, if known,
// the whole file's. It is idempotent: a Complete whose answer was lost is
// retried and gets the same completed body. A part S3 lacks is an *Error
// with Code api.CodePartsMissing; a part S3 holds with other bytes than
// declared, one with Code CodePartsMismatch (final: the parts stored under
// this key are not the file's).
func (c *Client) Complete(ctx context.Context, uploadID string, req *api.CompleteRequest) (*api.Upload, error) {
	var payload []byte
	if req != nil {
		var err error
		if payload, err = json.Marshal(req); err != nil {
			return nil, fmt.Errorf("complete: %w", err)
		}
	}
	var u api.Upload
	if err := c.call(ctx, "complete", http.MethodPost, "/complete", uploadID, payload, &u); err != nil {
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

// Codes of the errors of an upload in parts whose bytes are not the
// file's. Neither is retried, and the key cannot store this file: a new
// key can.
const (
	// CodePartsMismatch: S3 holds parts under this key with other bytes
	// than the file's, found when a resumed upload checks the parts S3
	// holds against the file (Op "resume", before anything is sent), or
	// by the server at Complete (409 api.CodePartsMismatch). The file
	// changed since the upload began, or the key is another file's. With
	// Op "verify", the upload under this key is completed already and its
	// compositeSha256 is not the one the file's parts make: it holds
	// another file (sent with this key, completed first); nothing is
	// pending under the key, so there is nothing to abort.
	CodePartsMismatch = api.CodePartsMismatch
	// CodeFileChanged: the file changed while it was being sent (its size
	// or modification time, or a part read again differs from the first
	// read): the parts S3 holds are not all of one version of it, so the
	// upload is not completed.
	CodeFileChanged = "file_changed"
)

// uploadParts is Upload for size bytes of r in parts of partSize, once
// created: check the parts S3 holds if the key was known (replayed) against
// the file, send the others, complete with every part's SHA-256; parts
// that turn out missing at completion are sent and completion asked again.
// changed, if not nil, says whether the file changed since it was opened.
func (c *Client) uploadParts(ctx context.Context, r io.ReaderAt, size, partSize int64, res *Result, replayed bool, in UploadInput, changed func() error) (*Result, error) {
	plan := newPartPlan(size, partSize)
	parallel := in.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	switch res.Upload.Status {
	case api.StatusCompleted:
		// Completed by an earlier run, or by another file sent with this
		// key (of the same name and size): nothing is sent, but it is
		// this file only if its parts are.
		if in.OnCheck != nil {
			in.OnCheck(len(plan.sums), size)
		}
		if err := hashParts(ctx, r, plan, plan.numbers(), parallel, func(n int, sum string) bool {
			plan.sums[n-1] = sum // each part its own element: no lock
			return true
		}); err != nil {
			return nil, err
		}
		if err := sameComposite(plan, &res.Upload); err != nil {
			return nil, err
		}
		return res, nil
	case api.StatusAborted:
		return nil, &Error{Op: "create", StatusCode: http.StatusCreated, Code: CodeUploadAborted,
			Message: "the upload with this key (" + res.Upload.UploadID + ") was aborted; upload with a new key"}
	}
	id := res.Upload.UploadID
	var heldBytes int64
	if replayed { // only a known key can have parts in S3
		held, err := c.ListParts(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(held) > 0 && in.OnCheck != nil {
			var b int64
			for _, p := range held {
				b += p.Size
			}
			in.OnCheck(len(held), b)
		}
		if res.PartsHeld, heldBytes, err = c.checkHeld(ctx, r, plan, id, held, parallel); err != nil {
			return nil, err
		}
	}
	if res.PartsHeld > 0 && in.OnResume != nil {
		in.OnResume(res.PartsHeld, len(plan.sums), heldBytes, size)
	}
	var todo []int
	for n := 1; n <= len(plan.sums); n++ {
		if plan.sums[n-1] == "" {
			todo = append(todo, n)
		}
	}
	prog := newPartProgress(size, heldBytes, in.Progress, in.RateLimit)
	prog.onStored(res.PartsHeld, in.OnStored)
	for round := 0; ; round++ {
		if err := c.sendParts(ctx, id, r, plan, todo, parallel, prog); err != nil {
			return nil, err
		}
		res.PartsSent += len(todo)
		if changed != nil {
			if err := changed(); err != nil {
				return nil, err
			}
		}
		if in.OnCompleting != nil {
			in.OnCompleting()
		}
		done, err := c.Complete(ctx, id, &api.CompleteRequest{Parts: plan.declared()})
		var e *Error
		if err != nil && errors.As(err, &e) && e.Code == api.CodePartsMissing && round < 2 {
			// S3 lost a part, or another process changed one: list
			// again and send what is missing.
			c.opts.Logger.InfoContext(ctx, "parts missing at completion", "upload_id", id, "message", e.Message)
			held, err := c.ListParts(ctx, id)
			if err != nil {
				return nil, err
			}
			todo, heldBytes = missingParts(plan, held)
			prog.restart(len(plan.sums)-len(todo), heldBytes)
			continue
		}
		if err != nil && errors.As(err, &e) && e.Code == CodePartsMismatch {
			e.Message = "the parts S3 holds under this key are not this file's (" + e.Message + "); the upload was not completed: upload the file with a new key"
		}
		if err != nil {
			return nil, err
		}
		// The server answers a Complete of an upload completed already
		// with its completed body, whatever this one declared: another
		// file sent with this key may have completed it first.
		if err := sameComposite(plan, done); err != nil {
			return nil, err
		}
		res.Upload = *done
		return res, nil
	}
}

// sameComposite says whether u, a completed upload in parts, holds the
// parts of plan, whose SHA-256s are all known: its compositeSha256 must be
// the one they make. If not, the object stored under this key is another
// file's: an *Error with CodePartsMismatch and Op "verify".
func sameComposite(plan *partPlan, u *api.Upload) error {
	want := plan.composite()
	if want != "" && u.CompositeSHA256 == want {
		return nil
	}
	why := "its compositeSha256 is " + u.CompositeSHA256 + ", this file's parts make " + want
	if u.CompositeSHA256 == "" {
		why = "it states no compositeSha256, so it cannot be this file's parts (" + want + ")"
	}
	return &Error{Op: "verify", StatusCode: http.StatusOK, Code: CodePartsMismatch, Message: fmt.Sprintf(
		"upload %s, completed under this key, is another file (%s): this file is not stored; upload it with a new key",
		u.UploadID, why)}
}

// missingParts are the parts of plan that S3 does not hold with their
// length, in order, and the bytes it holds of the others. (A part held
// with other bytes is Complete's to find: parts_mismatch.)
func missingParts(plan *partPlan, held []api.StoredPart) (todo []int, heldBytes int64) {
	ok := make(map[int]bool, len(held))
	for _, p := range held {
		if p.PartNumber >= 1 && p.PartNumber <= len(plan.sums) && p.Size == plan.length(p.PartNumber) {
			ok[p.PartNumber] = true
		}
	}
	for n := 1; n <= len(plan.sums); n++ {
		if ok[n] {
			heldBytes += plan.length(n)
		} else {
			todo = append(todo, n)
		}
	}
	return todo, heldBytes
}

// checkHeld compares the parts S3 holds of a resumed upload with the file:
// no whole-file SHA-256 stands for the file in the create any more, so each
// held part is hashed from r (parallel at a time) and must be the file's
// part, with its length. It records their SHA-256s in plan and returns how
// many there are and their bytes. One that differs means the parts under
// this key are not this file's: an *Error with CodePartsMismatch, before a
// byte is sent, so the key never stores a mix of two files.
func (c *Client) checkHeld(ctx context.Context, r io.ReaderAt, plan *partPlan, uploadID string, held []api.StoredPart, parallel int) (int, int64, error) {
	var mu sync.Mutex
	var bad, numbers []int
	stored := make(map[int]api.StoredPart, len(held))
	for _, p := range held {
		n := p.PartNumber
		switch {
		case n < 1 || n > len(plan.sums):
			// not a part of this cut; Complete leaves it out
		case p.Size != plan.length(n):
			bad = append(bad, n)
		default:
			stored[n] = p
			numbers = append(numbers, n)
		}
	}
	count, heldBytes := 0, int64(0)
	var err error
	if len(bad) == 0 { // else the answer is known: no need to read
		err = hashParts(ctx, r, plan, numbers, parallel, func(n int, sum string) bool {
			mu.Lock()
			defer mu.Unlock()
			if !strings.EqualFold(sum, stored[n].SHA256) {
				bad = append(bad, n)
				return false // the answer is known: no need to read more
			}
			plan.sums[n-1] = sum
			count++
			heldBytes += stored[n].Size
			return true
		})
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return 0, 0, &Error{Op: "resume", Code: CodePartsMismatch, Message: fmt.Sprintf(
			"S3 holds part %s of upload %s with other bytes than this file's: the parts stored under this key are not this file's (it changed since the upload began, or the key is another file's); nothing was sent: upload the file with a new key",
			joinInts(bad), uploadID)}
	}
	if err != nil {
		return 0, 0, err
	}
	return count, heldBytes, nil
}

// hashParts hashes the parts numbers of plan from r, parallel at a time,
// and gives each one's SHA-256 to each, which may be called from several
// goroutines at once and returns false to stop the hashing (the answer is
// known). It returns the first read error, or ctx's cause if ctx ended;
// nil if each stopped it.
func hashParts(ctx context.Context, r io.ReaderAt, plan *partPlan, numbers []int, parallel int, each func(n int, sum string) bool) error {
	err := hashInOrder(ctx, r, plan, numbers, max(1, min(parallel, len(numbers))), nil, func(n int, sum string) error {
		if !each(n, sum) {
			return errEnough
		}
		return nil
	})
	if err != nil && err != errEnough && err != ctx.Err() {
		return err // a read error
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// errEnough is how hashParts' each stops the hashing: it has its answer.
var errEnough = errors.New("enough parts hashed")

// hashInOrder hashes the parts numbers of plan from r, handed out in
// order (reads a disk likes), hashers at once, and gives each one's
// SHA-256 to each, which may be called from several goroutines at once.
// wait, if not nil, is called before each part is handed out (sendParts
// waits there for room in its window). The first error of a read
// ("hash: …"), of each or of wait stops the rest and is returned; else
// ctx's error if it ended before every part was hashed.
func hashInOrder(ctx context.Context, r io.ReaderAt, plan *partPlan, numbers []int, hashers int, wait func(context.Context) error, each func(n int, sum string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(hashers)
	bufs := newHashBufs(hashers)
	started := 0
	for _, n := range numbers {
		if (wait != nil && wait(gctx) != nil) || gctx.Err() != nil {
			break // failed, stopped or ended: start no more
		}
		g.Go(func() error { return hashOne(gctx, r, plan, n, bufs, each) })
		started++
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if started < len(numbers) {
		return ctx.Err()
	}
	return nil
}

// hashOne hashes part n for hashInOrder and gives its SHA-256 to each.
// A read that fails because the hashing stopped or ctx ended is ctx's
// error, not a read error.
func hashOne(ctx context.Context, r io.ReaderAt, plan *partPlan, n int, bufs hashBufs, each func(n int, sum string) error) error {
	buf := bufs.get()
	defer bufs.put(buf)
	sum, err := hashPart(ctx, r, plan, n, buf)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("hash: %w", err)
	}
	return each(n, sum)
}

// hashBufs lends hashPart's buffers to the parts being hashed: a buffer
// for each part hashing at once, however many parts there are. Made for
// n at once, it never holds more than n.
type hashBufs chan []byte

func newHashBufs(n int) hashBufs { return make(hashBufs, n) }

func (b hashBufs) get() []byte {
	select {
	case buf := <-b:
		return buf
	default:
		return make([]byte, hashBufSize)
	}
}

func (b hashBufs) put(buf []byte) {
	select {
	case b <- buf:
	default:
	}
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// The look-ahead of sendParts.
const (
	// aheadBytes bounds the parts hashed beyond those in flight (one part
	// at least): the window of hashed parts not yet acknowledged by S3 is
	// the parallel parts in flight plus these, so hashing runs up to
	// (parallel + ahead) parts ahead of S3's acknowledgements, with ahead
	// at most aheadBytes/partSize and parallel+signBatch; by default
	// (4 parts of 8 MiB in flight) 4 + 16 = 20 parts, 160 MiB. A part is
	// read again to be sent, and should still be in the page cache by
	// then.
	aheadBytes = 128 << 20
	// signBatch is how many parts beyond the senders' needs may wait,
	// hashed, to be signed together.
	signBatch = 16
)

// lookAhead is how sendParts paces its stages for parallel senders and
// parts of partSize.
type lookAhead struct {
	// window: parts hashed and not yet acknowledged by S3 (those in flight
	// included), at most.
	window int
	// reserve: signed URLs the signer tries to keep ready for the senders.
	reserve int
	// batch: hashed parts the signer gathers into one request when the
	// senders have URLs enough.
	batch int
}

func newLookAhead(parallel int, partSize int64) lookAhead {
	ahead := int(min(int64(parallel+signBatch), max(1, aheadBytes/max(partSize, 1))))
	reserve := min(parallel, max(1, ahead/2))
	return lookAhead{window: parallel + ahead, reserve: reserve, batch: max(1, min(api.MaxPartsPerSign, ahead-reserve))}
}

// signNow says whether the signer signs the pending hashed parts now, with
// stock signed URLs waiting for the senders and done when no more parts
// will be hashed: at once when a sender may be waiting (no stock: the
// first part is signed as soon as it is hashed), when a batch is full, or
// when the stock runs low and a few parts are pending; otherwise it waits
// for more, since the senders have URLs.
func (la lookAhead) signNow(pending, stock int, done bool) bool {
	switch {
	case pending == 0:
		return false
	case done, stock == 0, pending >= la.batch:
		return true
	}
	return stock < la.reserve && pending >= la.reserve
}

// hasherCount is how many parts sendParts hashes at once: one per part in
// flight, up to half the cores Go may use, and never more than the parts
// to hash. A hasher is CPU-bound and SHA-256 runs faster than the parts
// go out, so the other half of the cores is left for sending (TLS, the
// kernel's copies), from which more hashers would only take cycles.
func hasherCount(parallel, parts int) int {
	return max(1, min(parallel, runtime.GOMAXPROCS(0)/2, parts))
}

// partJob is a signed part for a sender, with the SHA-256 its URL signs.
type partJob struct {
	sp  api.SignedPart
	sum string
}

// sendParts sends the parts todo of plan, read from r, and records each
// one's SHA-256 in plan. Nothing reads the file before: the first part is
// hashed, signed and on its way at once.
//
// A part's SHA-256 is signed into its URL, so it must be known before the
// PUT starts: each part is read twice, once to hash it and once as the
// PUT's body (again on a retry), rather than held in memory. Holding the
// parts in flight would take parallel × partSize (32 MiB for 4 parts of
// 8 MiB, more with the garbage collector's slack, and parts may be up to
// 5 GiB), while the second read of a part read moments before comes from
// the page cache: memory does not grow with the part size.
//
// Three stages, each a function of partPipeline, in one errgroup: the
// first to fail for good cancels the others and is the error. hashAll
// hands the parts out in file order (reads a disk likes), at most window
// parts ahead of S3's acknowledgements, to hasherCount hashers (so that
// hashing keeps up with the parts in flight on a machine with cores to
// spare); signAll signs the hashed parts in batches; sendAll PUTs them,
// parallel at a time. The signer signs what is hashed at once when no
// signed URL waits for the senders (so the first part is signed as soon
// as it is hashed), and otherwise gathers parts into one request
// (lookAhead.signNow), keeping a few URLs ready so that a sender rarely
// waits for a sign round trip, and far fewer sign requests than parts are
// made. Each part is retried on its own.
func (c *Client) sendParts(ctx context.Context, uploadID string, r io.ReaderAt, plan *partPlan, todo []int, parallel int, prog *partProgress) error {
	if len(todo) == 0 {
		return nil
	}
	la := newLookAhead(parallel, plan.partSize)
	p := &partPipeline{c: c, uploadID: uploadID, r: r, plan: plan, prog: prog, la: la,
		slots:  make(chan struct{}, la.window),
		hashed: make(chan api.PartToSign, la.window),
		jobs:   make(chan partJob, la.window),
		took:   make(chan struct{}, la.window),
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.hashAll(ctx, todo, hasherCount(parallel, len(todo))) })
	g.Go(func() error { return p.signAll(ctx) })
	g.Go(func() error { return p.sendAll(ctx, len(todo), max(1, min(parallel, len(todo)))) })
	return g.Wait()
}

// partPipeline is one sendParts: what its stages share, and the channels
// between them.
type partPipeline struct {
	c        *Client
	uploadID string
	r        io.ReaderAt
	plan     *partPlan
	prog     *partProgress
	la       lookAhead
	slots    chan struct{}       // parts hashed and not yet acknowledged
	hashed   chan api.PartToSign // to the signer
	jobs     chan partJob        // to the senders; never full (slots)
	took     chan struct{}       // a sender took a job: the signer may need to sign
}

// hashAll hashes the parts todo, hashers at once, each once the window
// has room for it (a slot), and passes them on to the signer. Parts left
// unhashed are always an error (ctx's if it ended).
func (p *partPipeline) hashAll(ctx context.Context, todo []int, hashers int) error {
	defer close(p.hashed)
	return hashInOrder(ctx, p.r, p.plan, todo, hashers, p.takeSlot, p.passOn)
}

// takeSlot waits for room in the window of hashed parts not yet
// acknowledged by S3; a sender frees the slot once S3 took its part.
func (p *partPipeline) takeSlot(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// passOn records part n's SHA-256 in plan (each part is its own element
// of plan.sums, and one hasher's: no lock) and passes it on to the
// signer. A part that hashes otherwise than when it was sent before (a
// part found missing at completion) is the file changing.
func (p *partPipeline) passOn(n int, sum string) error {
	if prev := p.plan.sums[n-1]; prev != "" && prev != sum {
		return &Error{Op: fmt.Sprintf("hash part %d", n), Code: CodeFileChanged,
			Message: fmt.Sprintf("part %d of the file is not what it was when it was first sent: the file changed while it was being uploaded; the upload was not completed", n)}
	}
	p.plan.sums[n-1] = sum
	p.hashed <- api.PartToSign{PartNumber: n, SHA256: sum} // never blocks: a slot is held
	return nil
}

// signAll signs the hashed parts when lookAhead.signNow says so, and
// hands them to the senders; it ends when every part is signed and
// handed out.
func (p *partPipeline) signAll(ctx context.Context) error {
	defer close(p.jobs)
	var pending []api.PartToSign
	in := p.hashed
	for {
		if p.la.signNow(len(pending), len(p.jobs), in == nil) {
			signed, err := p.c.SignParts(ctx, p.uploadID, pending)
			if err != nil {
				return err
			}
			byNumber := make(map[int]api.SignedPart, len(signed))
			for _, sp := range signed {
				byNumber[sp.PartNumber] = sp
			}
			for _, h := range pending {
				p.jobs <- partJob{sp: byNumber[h.PartNumber], sum: h.SHA256}
			}
			pending = nil
			continue
		}
		if in == nil {
			return nil
		}
		select {
		case h, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			pending = append(pending, h)
		drain: // whatever else is hashed goes in the same request
			for len(pending) < api.MaxPartsPerSign {
				select {
				case h, ok := <-in:
					if !ok {
						in = nil
						break drain
					}
					pending = append(pending, h)
				default:
					break drain
				}
			}
		case <-p.took:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sendAll PUTs the parts the signer hands out, parallel at a time. Parts
// left unsent are always an error (ctx's if it ended).
func (p *partPipeline) sendAll(ctx context.Context, parts, parallel int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	started := 0
	for range parts {
		if gctx.Err() != nil {
			break // failed or ended: start no more
		}
		g.Go(func() error { return p.send(gctx) })
		started++
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if started < parts {
		return ctx.Err()
	}
	return nil
}

// send takes the next signed part, only once a sender is free, so that
// those waiting in jobs are the signer's stock of URLs, and PUTs it.
func (p *partPipeline) send(ctx context.Context) error {
	var j partJob
	select {
	case next, ok := <-p.jobs:
		if !ok {
			return nil // the signer stopped: its error is sendParts'
		}
		j = next
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case p.took <- struct{}{}:
	default:
	}
	if err := p.c.sendPart(ctx, p.uploadID, p.r, p.plan, j, p.prog); err != nil {
		return err
	}
	<-p.slots
	return nil
}

// sendPart PUTs one part; a refusal because its URL no longer works (see
// urlExpired) signs it again, at most twice.
func (c *Client) sendPart(ctx context.Context, uploadID string, r io.ReaderAt, plan *partPlan, j partJob, prog *partProgress) error {
	sp := j.sp
	for resigned := 0; ; resigned++ {
		err := c.putPart(ctx, sp, r, plan, prog)
		if e := (*Error)(nil); errors.As(err, &e) && e.StatusCode == http.StatusBadRequest && e.Code != "ExpiredToken" {
			// S3 refuses bytes that are not the signed SHA-256's
			// (BadDigest): if the part reads otherwise now than when it
			// was hashed, the file changed; say so.
			if sum, herr := hashPart(ctx, r, plan, sp.PartNumber, make([]byte, hashBufSize)); herr == nil && sum != j.sum {
				return &Error{Op: e.Op, StatusCode: e.StatusCode, Code: CodeFileChanged, Attempts: e.Attempts, Host: e.Host, Storage: e.Storage,
					Message: fmt.Sprintf("part %d of the file changed between its hashing and its sending (S3 answered %s): the file changed while it was being uploaded; the upload was not completed", sp.PartNumber, cmp.Or(e.Code, "400"))}
			}
		}
		if err == nil || !urlExpired(err) || resigned >= 2 {
			return err
		}
		c.opts.Logger.InfoContext(ctx, "signing a part again", "upload_id", uploadID, "part", sp.PartNumber)
		signed, err := c.SignParts(ctx, uploadID, []api.PartToSign{{PartNumber: sp.PartNumber, SHA256: j.sum}})
		if err != nil {
			return err
		}
		sp = signed[0]
	}
}

// putPart sends part sp.PartNumber of plan, read from body, to its
// presigned URL, retrying as any request (S3 part PUTs are idempotent). A
// 403 usually means the URL expired: sign the part again.
func (c *Client) putPart(ctx context.Context, sp api.SignedPart, body io.ReaderAt, plan *partPlan, prog *partProgress) error {
	n := sp.PartNumber
	if n < 1 || n > len(plan.sums) {
		return &Error{Op: "put part", Message: fmt.Sprintf("part %d is outside 1..%d", n, len(plan.sums))}
	}
	length := plan.length(n)
	_, _, err := c.do(ctx, toStorage, fmt.Sprintf("put part %d", n), func() (*http.Request, error) {
		var r io.Reader = io.NewSectionReader(body, plan.offset(n), length)
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
