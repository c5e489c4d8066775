package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

func TestPartSizeFor(t *testing.T) {
	t.Parallel()
	const mib, gib = 1 << 20, 1 << 30
	cases := []struct {
		size, want int64
	}{
		{0, 0},
		{MultipartThreshold - 1, 0},
		{MultipartThreshold, 8 * mib},
		{1 * gib, 8 * mib},
		{80 * gib, 9 * mib},              // 80 GiB / 10,000 = 8.19 MiB
		{1 << 40, 105 * mib},             // 1 TiB / 10,000 = 104.9 MiB
		{api.MaxMultipartBytes, gib * 5}, // S3's largest object
	}
	for _, tc := range cases {
		got := PartSizeFor(tc.size)
		if got != tc.want {
			t.Errorf("PartSizeFor(%d) = %d, want %d", tc.size, got, tc.want)
		}
		if got == 0 {
			continue
		}
		if got < api.MinPartSize || got > api.MaxPartSize || got%mib != 0 || api.PartCount(tc.size, got) > api.MaxParts {
			t.Errorf("PartSizeFor(%d) = %d: %d parts, outside S3's limits or not whole MiB", tc.size, got, api.PartCount(tc.size, got))
		}
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hashPart hashes each part of a cut on its own, whatever the part size's
// relation to its read buffer; the parts are api.PartCount's.
func TestHashPart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		size, partSize int
	}{
		{"parts fill the file", 4 * hashBufSize, hashBufSize},
		{"a short last part", 3*hashBufSize + 17, hashBufSize},
		{"parts across read buffers", 3*hashBufSize + 5, 300_001},
		{"one part larger than the file", 1000, hashBufSize},
		{"one byte parts", 7, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := randomBytes(t, tc.size)
			plan := newPartPlan(int64(tc.size), int64(tc.partSize))
			var want []string
			for off := 0; off < len(data); off += tc.partSize {
				want = append(want, hexSum(data[off:min(off+tc.partSize, len(data))]))
			}
			if len(plan.sums) != len(want) {
				t.Fatalf("%d parts in the plan, %d in the file", len(plan.sums), len(want))
			}
			buf := make([]byte, hashBufSize)
			for n := 1; n <= len(want); n++ {
				sum, err := hashPart(context.Background(), bytes.NewReader(data), plan, n, buf)
				if err != nil || sum != want[n-1] {
					t.Fatalf("part %d: %s, %v; want %s", n, sum, err, want[n-1])
				}
			}
		})
	}
}

func TestMissingParts(t *testing.T) {
	t.Parallel()
	// Three parts of 10 bytes and one of 5.
	plan := &partPlan{size: 35, partSize: 10, sums: make([]string, 4)}
	held := func(n int, size int64) api.StoredPart {
		return api.StoredPart{PartNumber: n, Size: size, SHA256: strings.Repeat("1", 64), ETag: "e"}
	}
	for _, tc := range []struct {
		name      string
		held      []api.StoredPart
		todo      []int
		heldBytes int64
	}{
		{"nothing held", nil, []int{1, 2, 3, 4}, 0},
		{"all held", []api.StoredPart{held(1, 10), held(2, 10), held(3, 10), held(4, 5)}, nil, 35},
		{"some held", []api.StoredPart{held(2, 10), held(4, 5)}, []int{1, 3}, 15},
		{"held with another length", []api.StoredPart{held(4, 10)}, []int{1, 2, 3, 4}, 0},
		{"parts out of range", []api.StoredPart{held(0, 10), held(5, 5)}, []int{1, 2, 3, 4}, 0},
	} {
		todo, heldBytes := missingParts(plan, tc.held)
		if !slices.Equal(todo, tc.todo) || heldBytes != tc.heldBytes {
			t.Errorf("%s: missingParts = %v, %d; want %v, %d", tc.name, todo, heldBytes, tc.todo, tc.heldBytes)
		}
	}
}

// cancelingReader cancels its context at its first read, and counts them.
type cancelingReader struct {
	cancel context.CancelFunc
	reads  int
}

func (c *cancelingReader) ReadAt(b []byte, off int64) (int, error) {
	c.reads++
	c.cancel()
	return len(b), nil
}

// Hashing a part stops between reads once its context ends: an interrupt
// does not wait for the rest of a part, which may be GiBs.
func TestHashPartStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	r := &cancelingReader{cancel: cancel}
	plan := newPartPlan(3<<30, 1<<30)
	_, err := hashPart(ctx, r, plan, 2, make([]byte, hashBufSize))
	if !errors.Is(err, context.Canceled) || r.reads != 1 {
		t.Fatalf("err = %v after %d reads; want canceled after 1", err, r.reads)
	}
}

// The look-ahead stays within aheadBytes past the parts in flight (one part
// at least), and keeps signed URLs for the workers.
func TestLookAhead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		parallel int
		partSize int64
		want     lookAhead
	}{
		{4, 8 << 20, lookAhead{window: 20, reserve: 4, batch: 12}},
		{4, 5 << 20, lookAhead{window: 24, reserve: 4, batch: 16}},
		{8, 8 << 20, lookAhead{window: 24, reserve: 8, batch: 8}},
		{4, 64 << 20, lookAhead{window: 6, reserve: 1, batch: 1}},
		{4, 5 << 30, lookAhead{window: 5, reserve: 1, batch: 1}},
		{1, 1024, lookAhead{window: 18, reserve: 1, batch: 16}},
	} {
		if got := newLookAhead(tc.parallel, tc.partSize); got != tc.want {
			t.Errorf("newLookAhead(%d, %d) = %+v, want %+v", tc.parallel, tc.partSize, got, tc.want)
		}
	}
}

// The signer signs at once when a worker may be waiting, else gathers a
// batch, or a few parts once the URLs ready run low.
func TestSignNow(t *testing.T) {
	t.Parallel()
	la := lookAhead{window: 20, reserve: 4, batch: 12}
	for _, tc := range []struct {
		pending, stock int
		done, want     bool
	}{
		{0, 0, false, false},
		{0, 0, true, false},
		{1, 0, false, true},   // the first part, or workers waiting
		{1, 3, false, false},  // URLs ready: gather more
		{3, 3, false, false},  //
		{4, 3, false, true},   // running low, a few pending
		{11, 4, false, false}, //
		{12, 8, false, true},  // a full batch
		{2, 9, true, true},    // the last parts
	} {
		if got := la.signNow(tc.pending, tc.stock, tc.done); got != tc.want {
			t.Errorf("signNow(%d pending, %d ready, done %v) = %v, want %v", tc.pending, tc.stock, tc.done, got, tc.want)
		}
	}
}

// The progress figure: never below what S3 acknowledged, never above the
// total, and a stale attempt's late reads do not count.
func TestPartProgress(t *testing.T) {
	t.Parallel()
	var seen []int64
	p := newPartProgress(100, 20, func(sent, total int64) {
		if total != 100 {
			t.Errorf("total %d", total)
		}
		seen = append(seen, sent)
	}, 0)
	ctx := context.Background()
	r1 := p.reader(ctx, 1, strings.NewReader(strings.Repeat("a", 30)))
	r2 := p.reader(ctx, 2, strings.NewReader(strings.Repeat("b", 30)))
	buf := make([]byte, 10)
	_, _ = r1.Read(buf) // 20 + 10
	_, _ = r2.Read(buf) // 20 + 10 + 10
	// Part 1's attempt fails; its retry starts from zero while the old
	// attempt's body is still read by the transport.
	r1b := p.reader(ctx, 1, strings.NewReader(strings.Repeat("a", 30)))
	_, _ = r1.Read(buf) // stale: not counted
	_, _ = r1b.Read(buf)
	p.done(2, 30)
	_, _ = r1b.Read(buf)
	_, _ = r1b.Read(buf)
	p.done(1, 30)
	want := []int64{20, 30, 40, 30, 40, 60, 70, 80, 80}
	if !slices.Equal(seen, want) {
		t.Errorf("reports %v, want %v", seen, want)
	}
	if p.acked != 80 {
		t.Errorf("acknowledged %d, want 80", p.acked)
	}
}

// mpClient is a client on the fake whose waits are instant.
func mpClient(t *testing.T, f *fakeAPI) *Client {
	t.Helper()
	c, err := New(f.srv.URL, func(o *Options) {
		o.random = func() float64 { return 0.5 }
		o.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tempFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const testPart = 64 << 10

// signsOf counts the sign requests that named each part.
func signsOf(f *fakeAPI) map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]int{}
	for _, batch := range f.signed {
		for _, n := range batch {
			out[n]++
		}
	}
	return out
}

// checkDeclared: the multipart create declared no whole-file SHA-256, and
// the last Complete declared every part's, in order.
func checkDeclared(t *testing.T, f *fakeAPI, data []byte, partSize int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.creates {
		if c.SHA256 != "" {
			t.Errorf("the multipart create declared sha256 %s; want none (no pass over the file first)", c.SHA256)
		}
	}
	if len(f.completeBodies) == 0 {
		t.Fatal("no complete")
	}
	last := f.completeBodies[len(f.completeBodies)-1]
	var want []api.PartToSign
	for off, n := 0, 1; off < len(data); off, n = off+partSize, n+1 {
		want = append(want, api.PartToSign{PartNumber: n, SHA256: hexSum(data[off:min(off+partSize, len(data))])})
	}
	if !slices.Equal(last.Parts, want) || last.SHA256 != "" {
		t.Errorf("complete declared %d parts, sha256 %q; want every part's (%d), in order, and no whole-file sha256", len(last.Parts), last.SHA256, len(want))
	}
}

func TestUploadInParts(t *testing.T) {
	t.Parallel()
	data := randomBytes(t, 10*testPart+123) // 11 parts
	for _, tc := range []struct {
		name  string
		fault func(f *fakeAPI)
		check func(t *testing.T, f *fakeAPI, res *Result)
		puts  int // PUT attempts in all
		// resigned: parts signed twice, the second time alone.
		resigned []int
	}{
		{name: "clean", puts: 11},
		{name: "a part's answer lost", fault: func(f *fakeAPI) { f.loseAnswer[3] = 1 }, puts: 12,
			check: func(t *testing.T, f *fakeAPI, _ *Result) {
				if f.puts[3] != 2 {
					t.Errorf("part 3 sent %d times, want 2", f.puts[3])
				}
			}},
		{name: "an expired part URL", fault: func(f *fakeAPI) { f.forbid[5] = 1 }, puts: 12, resigned: []int{5}},
		{name: "an expired signing token", fault: func(f *fakeAPI) { f.expiredToken[7] = 1 }, puts: 12, resigned: []int{7}},
		{name: "parts missing at completion", fault: func(f *fakeAPI) { f.dropAtFirst = []int{2, 7} }, puts: 13,
			check: func(t *testing.T, f *fakeAPI, res *Result) {
				signs := signsOf(f)
				if f.completes != 2 || signs[2] != 2 || signs[7] != 2 || res.PartsSent != 13 {
					t.Errorf("%d completes, sign requests %v, %d parts sent; want 2, parts 2 and 7 signed again, 13", f.completes, f.signed, res.PartsSent)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			if tc.fault != nil {
				tc.fault(f)
			}
			c := mpClient(t, f)
			var reports []int64
			res, err := c.Upload(context.Background(), tempFile(t, data), UploadInput{
				PartSize: testPart, Parallel: 3,
				Progress: func(sent, total int64) {
					if total != int64(len(data)) || sent > total || sent < 0 {
						t.Errorf("progress %d of %d", sent, total)
					}
					reports = append(reports, sent)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Upload.Status != api.StatusCompleted || !bytes.Equal(f.object(res.Key), data) {
				t.Fatalf("status %s; the stored object is not the file", res.Upload.Status)
			}
			if res.Upload.SHA256 != "" || !strings.HasSuffix(res.Upload.CompositeSHA256, "-11") {
				t.Errorf("completed with sha256 %q, compositeSha256 %q; want none, and S3's of 11 parts", res.Upload.SHA256, res.Upload.CompositeSHA256)
			}
			checkDeclared(t, f, data, testPart)
			puts := 0
			for _, n := range f.puts {
				puts += n
			}
			if puts != tc.puts || f.maxFlight > 3 {
				t.Errorf("%d PUTs, %d in flight at most; want %d, ≤ 3", puts, f.maxFlight, tc.puts)
			}
			signs := signsOf(f)
			for n := 1; n <= 11; n++ {
				want := 1
				if slices.Contains(tc.resigned, n) {
					want = 2
					if !slices.ContainsFunc(f.signed, func(b []int) bool { return slices.Equal(b, []int{n}) }) {
						t.Errorf("sign requests %v; want part %d signed again alone", f.signed, n)
					}
				}
				if tc.check == nil && signs[n] != want {
					t.Errorf("part %d signed %d times, want %d", n, signs[n], want)
				}
			}
			if reports[len(reports)-1] != int64(len(data)) {
				t.Errorf("last progress %d, want %d", reports[len(reports)-1], len(data))
			}
			if tc.check != nil {
				tc.check(t, f, res)
			}
		})
	}
}

// 250 parts: every sign request names at most 100 parts, each part is
// signed once, and hashed parts are gathered so that far fewer requests
// than parts are made.
func TestPartsAreSignedInBatches(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	data := randomBytes(t, 250*1024)
	res, err := mpClient(t, f).Upload(context.Background(), tempFile(t, data), UploadInput{PartSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.object(res.Key), data) {
		t.Fatal("the object is not the file")
	}
	var sizes []int
	for _, s := range f.signed {
		sizes = append(sizes, len(s))
		if len(s) > api.MaxPartsPerSign {
			t.Errorf("a sign request of %d parts", len(s))
		}
	}
	signs := signsOf(f)
	for n := 1; n <= 250; n++ {
		if signs[n] != 1 {
			t.Errorf("part %d signed %d times", n, signs[n])
		}
	}
	if len(f.signed) > 250/4 {
		t.Errorf("%d sign requests (sizes %v) for 250 parts; want them batched", len(f.signed), sizes)
	}
	t.Logf("sign request sizes: %v", sizes)
}

// readLog is an io.ReaderAt that counts the bytes read from it.
type readLog struct {
	r    io.ReaderAt
	mu   sync.Mutex
	read int64
}

func (l *readLog) ReadAt(b []byte, off int64) (int, error) {
	n, err := l.r.ReadAt(b, off)
	l.mu.Lock()
	l.read += int64(n)
	l.mu.Unlock()
	return n, err
}

func (l *readLog) bytesRead() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.read
}

// No pass over the whole file before the first part goes: before the
// create, the client reads one byte (that the bytes reach their size);
// when the first part PUT reaches S3, no more than the look-ahead of hashed
// parts (a few of 200 here) and the bodies of the first PUTs.
func TestFirstPartBeforeWholeFileRead(t *testing.T) {
	t.Parallel()
	const parts, parallel = 200, 4
	data := randomBytes(t, parts*testPart)
	log := &readLog{r: bytes.NewReader(data)}
	f := newFakeAPI(t)
	var atCreate, atFirstPut int64 = -1, -1
	var once sync.Once
	f.onPut = func(int) { once.Do(func() { atFirstPut = log.bytesRead() }) }
	c := mpClient(t, f)
	c.opts.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && r.URL.Path == "/uploads" {
			atCreate = log.bytesRead()
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	res, err := c.UploadReader(context.Background(), log, int64(len(data)), UploadInput{Filename: "big.bin", ContentType: "application/octet-stream", PartSize: testPart, Parallel: parallel})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.object(res.Key), data) {
		t.Fatal("the object is not the file")
	}
	window := newLookAhead(parallel, testPart).window
	// The bodies of the first PUTs may be read before the first reaches S3.
	if limit := int64(window+parallel)*testPart + 1; atCreate != 1 || atFirstPut <= 0 || atFirstPut > limit {
		t.Errorf("read %d bytes before the create, %d before the first part PUT; want 1, then at most %d (%d parts hashed ahead and %d parts' bodies) of %d", atCreate, atFirstPut, limit, window, parallel, len(data))
	}
	t.Logf("read before the first part PUT: %.1f parts' worth", float64(atFirstPut)/testPart)
}

// Parts are hashed in parallel given cores to spare (two hashers on four
// cores): the first read of part 1 waits until part 2 is being read
// too, which a single hasher, done with part 1 first, would never do.
func TestPartsAreHashedInParallel(t *testing.T) {
	// Not parallel: it sets GOMAXPROCS, which the hashers follow.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const parts = 8
	data := randomBytes(t, parts*testPart)
	z := &rendezvousReader{r: bytes.NewReader(data), part: testPart, both: make(chan struct{})}
	f := newFakeAPI(t)
	res, err := mpClient(t, f).UploadReader(context.Background(), z, int64(len(data)), UploadInput{Filename: "big.bin", ContentType: "application/octet-stream", PartSize: testPart, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.object(res.Key), data) {
		t.Fatal("the object is not the file")
	}
	if z.waitedOut.Load() {
		t.Error("part 1 was hashed alone: part 2 was not read while part 1's first read waited")
	}
}

// rendezvousReader holds the first read of its first part until a read
// of its second part begins, or 10 s pass (waitedOut).
type rendezvousReader struct {
	r         io.ReaderAt
	part      int64
	both      chan struct{}
	once      sync.Once
	waitedOut atomic.Bool
}

func (z *rendezvousReader) ReadAt(b []byte, off int64) (int, error) {
	if off >= z.part && off < 2*z.part {
		z.once.Do(func() { close(z.both) })
	}
	if off == 0 {
		select {
		case <-z.both:
		case <-time.After(10 * time.Second):
			z.waitedOut.Store(true)
		}
	}
	return z.r.ReadAt(b, off)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Stopped after a few parts, the upload resumes with its key: it checks
// the parts S3 holds against the file and sends only the others; run
// again once completed, it sends nothing.
func TestResumeSendsOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	f, key, path, data, held := interruptedUpload(t)
	before := f.received
	var resumed, checked []int64
	res, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart,
		OnCheck: func(partsHeld int, bytesHeld int64) { checked = []int64{int64(partsHeld), bytesHeld} },
		OnResume: func(partsHeld, parts int, bytesHeld, total int64) {
			resumed = []int64{int64(partsHeld), int64(parts), bytesHeld, total}
		}})
	if err != nil {
		t.Fatal(err)
	}
	sent := f.received - before
	if want := int64(12-held) * testPart; sent != want || res.PartsHeld != held || res.PartsSent != 12-held {
		t.Errorf("resumed: sent %d bytes (%d parts, %d held); want %d (%d parts, %d held)", sent, res.PartsSent, res.PartsHeld, want, 12-held, held)
	}
	if want := []int64{int64(held), 12, int64(held) * testPart, 12 * testPart}; !slices.Equal(resumed, want) || !slices.Equal(checked, []int64{int64(held), int64(held) * testPart}) {
		t.Errorf("OnCheck(%v), OnResume(%v); want %v", checked, resumed, want)
	}
	if !res.Replayed || !bytes.Equal(f.object(key), data) {
		t.Fatalf("replayed %v; the object is not the file", res.Replayed)
	}
	checkDeclared(t, f, data, testPart)

	before = f.received
	again, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart})
	if err != nil || again.Upload.Status != api.StatusCompleted || again.PartsSent != 0 || f.received != before || f.completes != 1 {
		t.Errorf("again: %+v, %v; %d bytes sent, %d completes; want completed, nothing sent, 1 complete", again, err, f.received-before, f.completes)
	}
}

// interruptedUpload starts an upload of 12 parts with a new key and stops
// it once S3 holds 5 or so (and the server is idle): the fake, the key,
// the file and its bytes, and how many parts S3 holds.
func interruptedUpload(t *testing.T) (f *fakeAPI, key, path string, data []byte, held int) {
	t.Helper()
	f = newFakeAPI(t)
	c := mpClient(t, f)
	data = randomBytes(t, 12*testPart)
	path = tempFile(t, data)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	stored := 0
	f.onStored = func(int) {
		f.mu.Lock()
		stored++
		n := stored
		f.mu.Unlock()
		if n == 5 {
			once.Do(cancel)
		}
	}
	var last int64
	key = NewKey()
	_, err := c.Upload(ctx, path, UploadInput{Key: key, PartSize: testPart, Parallel: 2, Progress: func(sent, total int64) { last = sent }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want canceled", err)
	}
	if last >= int64(len(data)) {
		t.Errorf("progress reached %d of %d on an interrupt", last, len(data))
	}
	// A PUT the server had already taken in may still be storing its part
	// after the client gave up: wait for the server to finish, as S3
	// would have, before counting what it holds.
	// (A request still on its way counts too: idle means idle for 100 ms.)
	for idleSince, deadline := time.Now(), time.Now().Add(5*time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		f.mu.Lock()
		busy := f.inFlight > 0
		f.mu.Unlock()
		if busy {
			idleSince = time.Now()
		} else if time.Since(idleSince) > 100*time.Millisecond {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onStored = nil
	held = len(f.byKey[key].parts)
	if held == 0 || held == 12 {
		t.Fatalf("S3 holds %d parts after the interrupt", held)
	}
	return f, key, path, data, held
}

// A resumed upload whose file no longer matches a part S3 holds (the file
// changed since the upload began, or the key is another file's) is refused
// before a byte is sent: the key never stores a mix of two files.
func TestResumeRefusesAChangedFile(t *testing.T) {
	t.Parallel()
	f, key, path, data, _ := interruptedUpload(t)
	f.mu.Lock()
	var changed int
	for n := range f.byKey[key].parts {
		changed = max(changed, n)
	}
	f.mu.Unlock()
	// The same size, other bytes in a part S3 holds.
	data = slices.Clone(data)
	data[(changed-1)*testPart+7] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before, completes := f.received, f.completes
	resumed := false
	_, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart, OnResume: func(int, int, int64, int64) { resumed = true }})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodePartsMismatch || e.Op != "resume" || !strings.Contains(e.Message, fmt.Sprintf("part %d ", changed)) || !strings.Contains(err.Error(), "new key") {
		t.Fatalf("err = %v; want the parts held refused as not this file's, naming part %d", err, changed)
	}
	if f.received != before || f.completes != completes || resumed {
		t.Errorf("%d bytes sent, %d completes, resume told %v; want nothing", f.received-before, f.completes-completes, resumed)
	}
}

// The server's parts_mismatch at Complete is final: one Complete, and an
// error that says the parts under this key are not the file's.
func TestPartsMismatchAtCompleteIsFinal(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	data := randomBytes(t, 3*testPart)
	f.onStored = func(n int) {
		if n == 2 { // another writer's bytes replace part 2 once stored
			f.mu.Lock()
			for _, u := range f.byID {
				u.parts[2] = bytes.Repeat([]byte{'x'}, testPart)
			}
			f.mu.Unlock()
		}
	}
	_, err := mpClient(t, f).Upload(context.Background(), tempFile(t, data), UploadInput{PartSize: testPart})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodePartsMismatch || e.StatusCode != 409 || e.Attempts != 1 || !strings.Contains(e.Message, "not this file's") || !strings.Contains(e.Message, "2") {
		t.Fatalf("err = %v; want the 409 parts_mismatch, final, saying the parts are not this file's", err)
	}
	if f.completes != 1 {
		t.Errorf("%d completes, want 1", f.completes)
	}
}

// otherFile is a file named as path's, of the same size, whose part n
// differs: another file that a key may be reused for.
func otherFile(t *testing.T, path string, data []byte, partSize, n int) string {
	t.Helper()
	other := slices.Clone(data)
	other[(n-1)*partSize+1] ^= 0xff
	p := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(p, other, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The server answers a Complete of an upload completed already with its
// completed body, whatever the Complete declared: when another file sent
// with this key (the same name and size) completed it first, the client
// compares the body's compositeSha256 with its parts' and refuses it
// rather than report this file stored.
func TestCompletedByAnotherFileAtCompleteIsRefused(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	data := randomBytes(t, 4*testPart)
	path := tempFile(t, data)
	key := NewKey()
	// The other file goes first, and completes.
	if _, err := mpClient(t, f).Upload(context.Background(), otherFile(t, path, data, testPart, 3), UploadInput{Key: key, PartSize: testPart}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	u := f.byKey[key]
	completed := u.body
	// This file's run had created the upload (it was pending then) and
	// gets to its Complete after the other's.
	u.body.Status, u.body.ETag, u.body.CompletedAt, u.body.CompositeSHA256 = api.StatusPending, "", "", ""
	u.parts = map[int][]byte{}
	f.onStored = func(n int) {
		if n == 4 {
			f.mu.Lock()
			u.body = completed
			f.mu.Unlock()
		}
	}
	f.mu.Unlock()
	_, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart, Parallel: 1})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodePartsMismatch || e.Op != "verify" || !strings.Contains(e.Message, completed.CompositeSHA256) || !strings.Contains(err.Error(), "another file") {
		t.Fatalf("err = %v; want %s: the upload under this key is another file", err, CodePartsMismatch)
	}
}

// A completed upload in parts under the key the create replays is this
// file only if its parts are: the client hashes them (sending nothing) and
// refuses another file's; the same file is "already uploaded".
func TestCompletedByAnotherFileAtCreateIsRefused(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	data := randomBytes(t, 5*testPart+17)
	path := tempFile(t, data)
	key := NewKey()
	first, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart})
	if err != nil {
		t.Fatal(err)
	}
	before, completes := f.received, f.completes
	var checked []int64
	for n := 1; n <= 6; n++ {
		_, err = mpClient(t, f).Upload(context.Background(), otherFile(t, path, data, testPart, n), UploadInput{Key: key, PartSize: testPart,
			OnCheck: func(parts int, b int64) { checked = []int64{int64(parts), b} }})
		var e *Error
		if !errors.As(err, &e) || e.Code != CodePartsMismatch || e.Op != "verify" || !strings.Contains(e.Message, first.Upload.UploadID) {
			t.Fatalf("part %d differs: err = %v; want %s", n, err, CodePartsMismatch)
		}
	}
	if !slices.Equal(checked, []int64{6, int64(len(data))}) {
		t.Errorf("OnCheck(%v); want every part, every byte", checked)
	}
	again, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart})
	if err != nil || again.Upload.CompositeSHA256 != first.Upload.CompositeSHA256 || !again.Replayed {
		t.Errorf("the same file again: %+v, %v; want it already uploaded", again, err)
	}
	if f.received != before || f.completes != completes {
		t.Errorf("%d bytes sent, %d completes; want nothing", f.received-before, f.completes-completes)
	}
}

// A file whose modification time changes while its parts are sent is not
// completed, though every part S3 took was read as hashed: the stat before
// Complete catches it (its parts could mix two versions of the file).
func TestFileChangedWhileSendingIsNotCompleted(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	data := randomBytes(t, 6*testPart)
	path := tempFile(t, data)
	var once sync.Once
	f.onStored = func(int) {
		once.Do(func() {
			// The same bytes, a new time: only the stat can tell.
			later := time.Now().Add(time.Hour) // a coarse clock must not hide it
			if err := os.Chtimes(path, later, later); err != nil {
				t.Error(err)
			}
		})
	}
	_, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{PartSize: testPart, Parallel: 1})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeFileChanged || e.Op != "upload" || !strings.Contains(e.Message, "modification time") {
		t.Fatalf("err = %v; want %s from the stat before Complete", err, CodeFileChanged)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completes != 0 || len(f.puts) != 6 {
		t.Errorf("%d completes, %d parts sent; want every part sent, none completed", f.completes, len(f.puts))
	}
}

// changingReader serves data, but part 2 (of testPart bytes) reads
// otherwise once it has been read whole: after it was hashed.
type changingReader struct {
	data []byte
	mu   sync.Mutex
	read bool
}

func (c *changingReader) ReadAt(b []byte, off int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := bytes.NewReader(c.data).ReadAt(b, off)
	changed := c.read
	if off == testPart && n >= testPart {
		c.read = true
	}
	if changed {
		for i := range n {
			if p := off + int64(i); p >= testPart && p < 2*testPart {
				b[i] ^= 0xff
			}
		}
	}
	return n, err
}

// A part whose bytes change between its hashing and its sending is refused
// by S3 (BadDigest: the URL signs the first SHA-256); the client reads it
// again, finds it changed, and fails with CodeFileChanged, not completed.
// (A reader, not a file: no modification time to tell.)
func TestPartChangedBeforeItsSendingIsNotCompleted(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	r := &changingReader{data: randomBytes(t, 6*testPart)}
	_, err := mpClient(t, f).UploadReader(context.Background(), r, int64(len(r.data)), UploadInput{Filename: "big.bin", PartSize: testPart, Parallel: 1})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeFileChanged || e.Op != "put part 2" || e.StatusCode != 400 || !strings.Contains(e.Message, "BadDigest") {
		t.Fatalf("err = %v; want %s from part 2's BadDigest", err, CodeFileChanged)
	}
	if f.completes != 0 {
		t.Errorf("%d completes, want none", f.completes)
	}
}

// A part S3 refuses for good fails the upload with S3's status, and the
// other parts stop.
func TestRefusedPartFailsTheUpload(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.refuse[2] = 400
	_, err := mpClient(t, f).Upload(context.Background(), tempFile(t, randomBytes(t, 40*testPart)), UploadInput{PartSize: testPart, Parallel: 2})
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Op != "put part 2" || e.Attempts != 1 {
		t.Fatalf("err = %v, want part 2's 400 after one attempt", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completes != 0 || len(f.puts) == 40 {
		t.Errorf("%d completes, %d parts tried; want none completed and the rest stopped", f.completes, len(f.puts))
	}
}

// The automatic choice: one PUT below the threshold, parts from it up, and
// the caller's choice either way.
func TestUploadPicksPartsBySize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size, partSize, want int64
	}{
		{MultipartThreshold - 1, 0, 0},
		{MultipartThreshold, 0, MinAutoPartSize},
		{MultipartThreshold, -1, 0},
		{1000, api.MinPartSize, api.MinPartSize},
	} {
		f := newFakeAPI(t)
		f.refuseCreate = true
		path := filepath.Join(t.TempDir(), "sparse.bin")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, tc.size); err != nil {
			t.Fatal(err)
		}
		_, err := mpClient(t, f).Upload(context.Background(), path, UploadInput{PartSize: tc.partSize})
		if len(f.creates) != 1 || err == nil {
			t.Fatalf("size %d: %d creates, err %v", tc.size, len(f.creates), err)
		}
		if got := f.creates[0]; got.PartSize != tc.want || got.Size != tc.size {
			t.Errorf("size %d, PartSize %d: created with size %d, partSize %d; want partSize %d", tc.size, tc.partSize, got.Size, got.PartSize, tc.want)
		}
	}
}

// A file that needs more than api.MaxParts parts of the chosen size is
// refused before it is read or anything is sent.
func TestTooManyPartsIsRefusedFirst(t *testing.T) {
	f := newFakeAPI(t)
	p := filepath.Join(t.TempDir(), "sparse.bin")
	file, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: about 52 GB that take no disk, and would take minutes to hash.
	if err := file.Truncate(api.MaxParts*api.MinPartSize + 1); err != nil {
		t.Fatal(err)
	}
	file.Close()
	_, err = mpClient(t, f).Upload(context.Background(), p, UploadInput{PartSize: api.MinPartSize})
	if err == nil || !strings.Contains(err.Error(), "10001 parts") || !strings.Contains(err.Error(), "at most 10000") {
		t.Errorf("err = %v, want the part count refused", err)
	}
	if len(f.creates) != 0 {
		t.Errorf("%d creates sent", len(f.creates))
	}
}
