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
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var readErr error
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(parallel, len(numbers))) {
		wg.Go(func() {
			buf := make([]byte, hashBufSize)
			for n := range work {
				if inner.Err() != nil {
					continue
				}
				sum, err := hashPart(inner, r, plan, n, buf)
				if err != nil {
					if inner.Err() == nil { // not stopped: a read error
						mu.Lock()
						readErr = cmp.Or(readErr, err)
						mu.Unlock()
					}
					cancel()
					continue
				}
				if !each(n, sum) {
					cancel()
				}
			}
		})
	}
feed:
	for _, n := range numbers {
		select {
		case work <- n:
		case <-inner.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	switch {
	case readErr != nil:
		return fmt.Errorf("hash: %w", readErr)
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return nil
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
	// signBatch is how many parts beyond the workers' needs may wait,
	// hashed, to be signed together.
	signBatch = 16
)

// lookAhead is how sendParts paces its stages for parallel workers and
// parts of partSize.
type lookAhead struct {
	// window: parts hashed and not yet acknowledged by S3 (those in flight
	// included), at most.
	window int
	// reserve: signed URLs the signer tries to keep ready for the workers.
	reserve int
	// batch: hashed parts the signer gathers into one request when the
	// workers have URLs enough.
	batch int
}

func newLookAhead(parallel int, partSize int64) lookAhead {
	ahead := int(min(int64(parallel+signBatch), max(1, aheadBytes/max(partSize, 1))))
	reserve := min(parallel, max(1, ahead/2))
	return lookAhead{window: parallel + ahead, reserve: reserve, batch: max(1, min(api.MaxPartsPerSign, ahead-reserve))}
}

// signNow says whether the signer signs the pending hashed parts now, with
// stock signed URLs waiting for the workers and done when no more parts
// will be hashed: at once when a worker may be waiting (no stock: the
// first part is signed as soon as it is hashed), when a batch is full, or
// when the stock runs low and a few parts are pending; otherwise it waits
// for more, since the workers have URLs.
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
// to hash. A hasher is CPU-bound, and the other half is for sending (TLS,
// the kernel's copies): one hasher outruns what two cores can send (about
// 1.3 GB/s of SHA-256 here, against 330 MiB/s for pre-hashed parts with
// nothing to hash), and a second only took cycles from the sending.
func hasherCount(parallel, parts int) int {
	return max(1, min(parallel, runtime.GOMAXPROCS(0)/2, parts))
}

// partJob is a signed part for a worker, with the SHA-256 its URL signs.
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
// the page cache: measured on two cores, about 2 ms per 8 MiB part,
// against 6 ms to hash it, in an upload to the local stack that takes
// 60 ms a part. The CLI's peak RSS for 1 GiB in 8 MiB parts is 15 MiB, and
// does not grow with the part size.
//
// Three stages: hashers read and hash the parts, handed out in file order
// (reads a disk likes), at most window parts ahead of S3's
// acknowledgements (hasherCount of them, so that hashing keeps up with
// the parts in flight on a machine with cores to spare); a signer signs
// the hashed parts in batches; parallel workers PUT them. The
// signer signs what is hashed at once when no signed URL waits for the
// workers (so the first part is signed as soon as it is hashed), and
// otherwise gathers parts into one request (lookAhead.signNow), keeping a
// few URLs ready so that a worker rarely waits for a sign round trip, and
// far fewer sign requests than parts are made. Each part is retried on its
// own; a part that fails for good stops the others and is the error.
func (c *Client) sendParts(ctx context.Context, uploadID string, r io.ReaderAt, plan *partPlan, todo []int, parallel int, prog *partProgress) error {
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
	la := newLookAhead(parallel, plan.partSize)
	slots := make(chan struct{}, la.window)        // parts hashed and not yet acknowledged
	hashed := make(chan api.PartToSign, la.window) // to the signer
	jobs := make(chan partJob, la.window)          // to the workers; never full (slots)
	took := make(chan struct{}, la.window)         // a worker took a job: the signer may need to sign
	var wg sync.WaitGroup
	// The hashers (hasherCount): parts are handed out in file order
	// (reads a disk likes), each hashed by one of them.
	numbers := make(chan int)
	wg.Go(func() {
		defer close(numbers)
		for _, n := range todo {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				fail(ctx.Err()) // never a nil error with parts unsent
				return
			}
			select {
			case numbers <- n:
			case <-ctx.Done():
				fail(ctx.Err())
				return
			}
		}
	})
	var hashers sync.WaitGroup
	for range hasherCount(parallel, len(todo)) {
		hashers.Go(func() {
			buf := make([]byte, hashBufSize)
			for n := range numbers {
				sum, err := hashPart(ctx, r, plan, n, buf)
				if err != nil {
					if ctx.Err() != nil {
						fail(ctx.Err())
					} else {
						fail(fmt.Errorf("hash: %w", err))
					}
					return
				}
				// Each part is its own element of plan.sums, and one
				// hasher's: no lock.
				if prev := plan.sums[n-1]; prev != "" && prev != sum {
					fail(&Error{Op: fmt.Sprintf("hash part %d", n), Code: CodeFileChanged,
						Message: fmt.Sprintf("part %d of the file is not what it was when it was first sent: the file changed while it was being uploaded; the upload was not completed", n)})
					return
				}
				plan.sums[n-1] = sum
				hashed <- api.PartToSign{PartNumber: n, SHA256: sum} // never blocks: a slot is held
			}
		})
	}
	wg.Go(func() {
		hashers.Wait()
		close(hashed)
	})
	wg.Go(func() { // the signer
		defer close(jobs)
		var pending []api.PartToSign
		in := hashed
		for {
			if la.signNow(len(pending), len(jobs), in == nil) {
				signed, err := c.SignParts(ctx, uploadID, pending)
				if err != nil {
					fail(err)
					return
				}
				byNumber := make(map[int]api.SignedPart, len(signed))
				for _, sp := range signed {
					byNumber[sp.PartNumber] = sp
				}
				for _, p := range pending {
					jobs <- partJob{sp: byNumber[p.PartNumber], sum: p.SHA256}
				}
				pending = nil
				continue
			}
			if in == nil {
				return // every part signed and handed out
			}
			select {
			case p, ok := <-in:
				if !ok {
					in = nil
					continue
				}
				pending = append(pending, p)
			drain: // whatever else is hashed goes in the same request
				for len(pending) < api.MaxPartsPerSign {
					select {
					case p, ok := <-in:
						if !ok {
							in = nil
							break drain
						}
						pending = append(pending, p)
					default:
						break drain
					}
				}
			case <-took:
			case <-ctx.Done():
				fail(ctx.Err())
				return
			}
		}
	})
	for range max(1, min(parallel, len(todo))) {
		wg.Go(func() {
			for j := range jobs {
				select {
				case took <- struct{}{}:
				default:
				}
				if err := c.sendPart(ctx, uploadID, r, plan, j, prog); err != nil {
					fail(err)
					return
				}
				<-slots
			}
		})
	}
	wg.Wait()
	return first
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
				return &Error{Op: e.Op, StatusCode: e.StatusCode, Code: CodeFileChanged, Attempts: e.Attempts,
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
