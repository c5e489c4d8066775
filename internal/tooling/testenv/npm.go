package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Need skips t (or, under REQUIRE_INTEGRATION=1, fails it) when err says
// that something the test needs (a server, a browser, a tool) is missing.
func Need(t testing.TB, err error) {
	t.Helper()
	need(t, err)
}

// Command runs name in dir and returns its stdout, failing t with its
// output if it fails or outlasts limit; its stderr and time are logged.
func Command(t testing.TB, dir string, limit time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %s\n%s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s%s", name, strings.Join(args, " "), dir, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// NpmPack packs the npm package in dir (npm pack, whose prepack script
// builds it, unless flags say --ignore-scripts) into dest, and returns the
// tarball's path and the files it holds.
func NpmPack(t testing.TB, npm, dir, dest string, flags ...string) (tarball string, files []string) {
	t.Helper()
	args := append([]string{"pack", "--json", "--pack-destination", dest, "--loglevel=error"}, flags...)
	out := Command(t, dir, 5*time.Minute, npm, args...)
	// The build's own lines come first on stdout: the JSON is the last thing, from a line "[".
	var packed []struct {
		Filename string
		Files    []struct{ Path string }
	}
	at := bytes.LastIndex(out, []byte("\n[\n"))
	if err := json.Unmarshal(out[at+1:], &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json in %s: %v\n%s", dir, err, out)
	}
	for _, f := range packed[0].Files {
		files = append(files, f.Path)
	}
	return filepath.Join(dest, packed[0].Filename), files
}

// LockFile holds an exclusive lock (flock(2)) on the file at path, made if
// missing, until unlock is called or t ends. Tests of different packages,
// which go test runs side by side, take one around work that must not
// overlap: web's package test rebuilds web/dist while uppy's packs it.
func LockFile(t testing.TB, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	var once sync.Once
	unlock = func() { once.Do(func() { _ = f.Close() }) } // closing the file releases the lock
	t.Cleanup(unlock)
	return unlock
}

// WebBuildLock is the lock (LockFile) held while web/dist is rebuilt or read
// by a test other than web's browser tests: a file in web/node_modules
// (ignored by git, there whenever those tests can run). webDir is web/.
func WebBuildLock(webDir string) string {
	return filepath.Join(webDir, "node_modules", ".onceupload-test-build.lock")
}
