package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

func TestDescribeParts(t *testing.T) {
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
			d, err := DescribeParts(bytes.NewReader(data), int64(tc.partSize))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for off := 0; off < len(data); off += tc.partSize {
				want = append(want, hexSum(data[off:min(off+tc.partSize, len(data))]))
			}
			if d.Size != int64(tc.size) || d.SHA256 != hexSum(data) || !slices.Equal(d.Parts, want) {
				t.Errorf("got size %d, sha %s, %d parts; want %d, %s, %d parts", d.Size, d.SHA256, len(d.Parts), tc.size, hexSum(data), len(want))
			}
			if n := api.PartCount(d.Size, d.PartSize); n != len(d.Parts) {
				t.Errorf("%d part sums, api.PartCount says %d", len(d.Parts), n)
			}
		})
	}
}

func TestPartsToSend(t *testing.T) {
	t.Parallel()
	// Three parts of 10 bytes and one of 5.
	d := &Digest{Size: 35, PartSize: 10, Parts: []string{strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64), strings.Repeat("4", 64)}}
	held := func(n int, size int64, sha string) api.StoredPart {
		return api.StoredPart{PartNumber: n, Size: size, SHA256: sha, ETag: "e"}
	}
	for _, tc := range []struct {
		name      string
		held      []api.StoredPart
		todo      []int
		heldBytes int64
	}{
		{"nothing held", nil, []int{1, 2, 3, 4}, 0},
		{"all held", []api.StoredPart{held(1, 10, d.Parts[0]), held(2, 10, d.Parts[1]), held(3, 10, d.Parts[2]), held(4, 5, d.Parts[3])}, nil, 35},
		{"some held", []api.StoredPart{held(2, 10, d.Parts[1]), held(4, 5, d.Parts[3])}, []int{1, 3}, 15},
		{"held with other bytes", []api.StoredPart{held(1, 10, strings.Repeat("f", 64)), held(2, 10, d.Parts[1])}, []int{1, 3, 4}, 10},
		{"held with another length", []api.StoredPart{held(4, 10, d.Parts[3])}, []int{1, 2, 3, 4}, 0},
		{"sha256 in upper case", []api.StoredPart{held(3, 10, strings.ToUpper(d.Parts[2]))}, []int{1, 2, 4}, 10},
		{"parts out of range", []api.StoredPart{held(0, 10, d.Parts[0]), held(5, 5, d.Parts[3])}, []int{1, 2, 3, 4}, 0},
	} {
		todo, heldBytes := partsToSend(d, tc.held)
		if !slices.Equal(todo, tc.todo) || heldBytes != tc.heldBytes {
			t.Errorf("%s: partsToSend = %v, %d; want %v, %d", tc.name, todo, heldBytes, tc.todo, tc.heldBytes)
		}
	}
}

func TestBatches(t *testing.T) {
	t.Parallel()
	seq := func(from, to int) []int {
		var out []int
		for i := from; i <= to; i++ {
			out = append(out, i)
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		want []int // batch sizes
	}{{0, nil}, {1, []int{1}}, {100, []int{100}}, {101, []int{100, 1}}, {250, []int{100, 100, 50}}} {
		got := batches(seq(1, tc.n), api.MaxPartsPerSign)
		var sizes []int
		var all []int
		for _, b := range got {
			sizes = append(sizes, len(b))
			all = append(all, b...)
		}
		if !slices.Equal(sizes, tc.want) || !slices.Equal(all, seq(1, tc.n)) {
			t.Errorf("batches of %d parts: sizes %v, want %v, in order", tc.n, sizes, tc.want)
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

func TestUploadInParts(t *testing.T) {
	t.Parallel()
	data := randomBytes(t, 10*testPart+123) // 11 parts
	for _, tc := range []struct {
		name   string
		fault  func(f *fakeAPI)
		check  func(t *testing.T, f *fakeAPI, res *Result)
		puts   int // PUT attempts in all
		signed int // sign requests
	}{
		{name: "clean", puts: 11, signed: 1},
		{name: "a part's answer lost", fault: func(f *fakeAPI) { f.loseAnswer[3] = 1 }, puts: 12, signed: 1,
			check: func(t *testing.T, f *fakeAPI, _ *Result) {
				if f.puts[3] != 2 {
					t.Errorf("part 3 sent %d times, want 2", f.puts[3])
				}
			}},
		{name: "an expired part URL", fault: func(f *fakeAPI) { f.forbid[5] = 1 }, puts: 12, signed: 2,
			check: func(t *testing.T, f *fakeAPI, _ *Result) {
				if !slices.Equal(f.signed[1], []int{5}) {
					t.Errorf("sign requests %v, want part 5 signed again alone", f.signed)
				}
			}},
		{name: "an expired signing token", fault: func(f *fakeAPI) { f.expiredToken[7] = 1 }, puts: 12, signed: 2,
			check: func(t *testing.T, f *fakeAPI, _ *Result) {
				if !slices.Equal(f.signed[1], []int{7}) {
					t.Errorf("sign requests %v, want part 7 signed again alone", f.signed)
				}
			}},
		{name: "parts missing at completion", fault: func(f *fakeAPI) { f.dropAtFirst = []int{2, 7} }, puts: 13, signed: 2,
			check: func(t *testing.T, f *fakeAPI, res *Result) {
				if f.completes != 2 || !slices.Equal(f.signed[1], []int{2, 7}) || res.PartsSent != 13 {
					t.Errorf("%d completes, sign requests %v, %d parts sent; want 2, then parts 2 and 7, 13", f.completes, f.signed, res.PartsSent)
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
			puts := 0
			for _, n := range f.puts {
				puts += n
			}
			if puts != tc.puts || len(f.signed) != tc.signed || f.maxFlight > 3 {
				t.Errorf("%d PUTs, %d sign requests, %d in flight at most; want %d, %d, ≤ 3", puts, len(f.signed), f.maxFlight, tc.puts, tc.signed)
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

// 250 parts are signed in requests of at most 100 parts.
func TestPartsAreSignedInBatches(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	data := randomBytes(t, 250*1024)
	res, err := mpClient(t, f).Upload(context.Background(), tempFile(t, data), UploadInput{PartSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, s := range f.signed {
		sizes = append(sizes, len(s))
	}
	if !slices.Equal(sizes, []int{100, 100, 50}) || !bytes.Equal(f.object(res.Key), data) {
		t.Errorf("sign request sizes %v, want [100 100 50]", sizes)
	}
}

// Stopped after a few parts, the upload resumes with its key: it sends
// only the parts S3 lacks; run again once completed, it sends nothing.
func TestResumeSendsOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	c := mpClient(t, f)
	data := randomBytes(t, 12*testPart)
	path := tempFile(t, data)
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
	key := NewKey()
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
	f.onStored = nil
	before := f.received
	held := len(f.byKey[key].parts)
	f.mu.Unlock()
	// One part is held with other bytes (from a file edited in between,
	// say): it is sent again.
	f.mu.Lock()
	var changed int
	for n := range f.byKey[key].parts {
		changed = n
		break
	}
	f.byKey[key].parts[changed] = bytes.Repeat([]byte{'x'}, testPart)
	f.mu.Unlock()

	res, err := c.Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart})
	if err != nil {
		t.Fatal(err)
	}
	sent := f.received - before
	if want := int64(12-held+1) * testPart; sent != want || res.PartsHeld != held-1 || res.PartsSent != 12-held+1 {
		t.Errorf("resumed: sent %d bytes (%d parts, %d held); want %d (%d parts, %d held)", sent, res.PartsSent, res.PartsHeld, want, 12-held+1, held-1)
	}
	if !res.Replayed || !bytes.Equal(f.object(key), data) {
		t.Fatalf("replayed %v; the object is not the file", res.Replayed)
	}

	before = f.received
	again, err := c.Upload(context.Background(), path, UploadInput{Key: key, PartSize: testPart})
	if err != nil || again.Upload.Status != api.StatusCompleted || again.PartsSent != 0 || f.received != before || f.completes != 1 {
		t.Errorf("again: %+v, %v; %d bytes sent, %d completes; want completed, nothing sent, 1 complete", again, err, f.received-before, f.completes)
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
