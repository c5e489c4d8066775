package web_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestBrowserBench measures, in Chromium against the local stack, the
// upload of one file of WEB_BENCH_MIB MiB (skipped without it): the time
// from the pick to the first part stored and to completion, and the
// throughput. WEB_BENCH_STOP=first-part stops (and discards) once a part is
// stored. WEB_BENCH_SPARSE=1 makes the file sparse (zeros, no disk
// space: hashing and sending cost the same). It logs the numbers and
// asserts nothing about them: timings depend on the machine and its load.
//
//	WEB_BENCH_MIB=1024 go test -count=1 -run TestBrowserBench -v ./web/
func TestBrowserBench(t *testing.T) {
	mibs, _ := strconv.ParseInt(os.Getenv("WEB_BENCH_MIB"), 10, 64)
	if mibs <= 0 {
		t.Skip("set WEB_BENCH_MIB (the file's size in MiB) to measure")
	}
	stop := os.Getenv("WEB_BENCH_STOP")
	h := newHarness(t)
	size := mibs * mib
	var path, sum string
	if os.Getenv("WEB_BENCH_SPARSE") == "1" {
		path, sum = sparseFile(t, t.TempDir(), "bench-"+strconv.FormatInt(mibs, 10)+"m.bin", size)
	} else {
		path, sum = bigFile(t, t.TempDir(), "bench-"+strconv.FormatInt(mibs, 10)+"m.bin", size)
	}
	before := h.objects(t)
	res := h.runWith(t, "bench", "", 30*time.Minute, "FILE_PATH="+path, "FILE_SHA256="+sum, "BENCH_STOP="+stop)
	tm := res.Timings
	t.Logf("%d MiB: timings (ms since the pick) %v", mibs, tm)
	if first, ok := tm["first-part-stored"]; ok {
		t.Logf("first part stored %.2f s after the pick", float64(first)/1000)
	}
	if stop == "first-part" {
		if added := h.newObjects(t, before); len(added) != 0 {
			t.Errorf("new objects %v after Discard", added)
		}
		return
	}
	done, ok := tm["phase:completed"]
	if !ok {
		t.Fatalf("never completed: %v", tm)
	}
	h.checkFiles(t, res)
	t.Logf("%d MiB uploaded in %.1f s: %.1f MiB/s", mibs, float64(done)/1000, float64(mibs)/(float64(done)/1000))
}

// sparseFile makes a file of size zero bytes that takes no disk space, and
// returns its path and SHA-256.
func sparseFile(t *testing.T, dir, name string, size int64) (path, sum string) {
	t.Helper()
	path = filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(zeros{}, size)); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
