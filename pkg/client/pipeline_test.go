package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// errDisk is a read that fails.
var errDisk = errors.New("input/output error")

// failingReader serves r, but fails every read from off to end.
type failingReader struct {
	r        io.ReaderAt
	off, end int64
}

func (f failingReader) ReadAt(b []byte, off int64) (int, error) {
	if off >= f.off && off < f.end {
		return 0, errDisk
	}
	return f.r.ReadAt(b, off)
}

// hashParts ends in one of three ways: every part hashed, each stopping it
// (nil), the first read error, or its context's cause.
func TestHashPartsEnds(t *testing.T) {
	t.Parallel()
	const parts = 8
	data := randomBytes(t, parts*testPart)
	plan := newPartPlan(int64(len(data)), testPart)
	ended := errors.New("the caller gave up")
	for _, tc := range []struct {
		name     string
		r        io.ReaderAt
		stopAt   int // each returns false for this part
		cause    error
		parallel int
		want     error // nil: no error
		wantSums []int // the parts each was given
	}{
		{name: "every part", r: bytes.NewReader(data), parallel: 1, wantSums: []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "every part, in parallel", r: bytes.NewReader(data), parallel: 3, wantSums: []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "stopped by each", r: bytes.NewReader(data), stopAt: 2, parallel: 1, wantSums: []int{1, 2}},
		{name: "a read error", r: failingReader{bytes.NewReader(data), 2 * testPart, 3 * testPart}, parallel: 1, want: errDisk, wantSums: []int{1, 2}},
		{name: "a read error, in parallel", r: failingReader{bytes.NewReader(data), 0, parts * testPart}, parallel: 3, want: errDisk},
		{name: "its context ended", r: bytes.NewReader(data), cause: ended, parallel: 3, want: ended},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		if tc.cause != nil {
			cancel(tc.cause)
		}
		var mu sync.Mutex
		var got []int
		err := hashParts(ctx, tc.r, plan, plan.numbers(), tc.parallel, func(n int, sum string) bool {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, n)
			return n != tc.stopAt
		})
		cancel(nil)
		slices.Sort(got)
		if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == errDisk && err != nil && !strings.HasPrefix(err.Error(), "hash: part ") {
			t.Errorf("%s: err = %q, want it to say hash: part …", tc.name, err)
		}
		if !slices.Equal(got, tc.wantSums) {
			t.Errorf("%s: each given parts %v, want %v", tc.name, got, tc.wantSums)
		}
	}
}

// A part that cannot be read fails the upload with the read error, before
// the parts after it are sent, and nothing is completed.
func TestReadErrorFailsTheUpload(t *testing.T) {
	t.Parallel()
	const parts = 40
	data := randomBytes(t, parts*testPart)
	f := newFakeAPI(t)
	_, err := mpClient(t, f).UploadReader(context.Background(), failingReader{bytes.NewReader(data), 3 * testPart, 4 * testPart}, int64(len(data)),
		UploadInput{Filename: "big.bin", ContentType: "application/octet-stream", PartSize: testPart, Parallel: 2})
	if want := "big.bin: hash: part 4: input/output error"; !errors.Is(err, errDisk) || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completes != 0 || len(f.puts) > 3 {
		t.Errorf("%d completes, %d parts sent; want none completed and at most the 3 parts before the unreadable one", f.completes, len(f.puts))
	}
}

// A sign request refused for good fails the upload with the sign's error,
// not with the cancellations it causes in the other stages, and nothing
// is completed.
func TestRefusedSignFailsTheUpload(t *testing.T) {
	t.Parallel()
	const parts = 40
	data := randomBytes(t, parts*testPart)
	f := newFakeAPI(t)
	c := mpClient(t, f)
	var signs atomic.Int32
	c.opts.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/parts") && signs.Add(1) == 2 {
			return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
				Body: io.NopCloser(strings.NewReader(`{"error":"invalid_request","message":"no"}`))}, nil
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	_, err := c.UploadReader(context.Background(), bytes.NewReader(data), int64(len(data)),
		UploadInput{Filename: "big.bin", ContentType: "application/octet-stream", PartSize: testPart, Parallel: 2})
	var e *Error
	if !errors.As(err, &e) || e.Op != "sign" || e.StatusCode != 400 || e.Code != "invalid_request" {
		t.Fatalf("err = %v, want the second sign's 400", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.completes != 0 || len(f.puts) == parts {
		t.Errorf("%d completes, %d parts sent; want none completed and the rest stopped", f.completes, len(f.puts))
	}
}
