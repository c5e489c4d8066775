package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/localstack"
	"github.com/onceupload/onceupload/internal/services"
	"github.com/onceupload/onceupload/internal/testenv"
)

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut); code != exitOK || !strings.Contains(errOut.String(), "Usage: upload") {
		t.Errorf("--help: %d %q", code, errOut.String())
	}
	for _, args := range [][]string{{}, {"--key", "k-0123456789abcdef", "a", "b"}, {"--key", "short", "a"}, {"--nope"}, {"--api", "ftp://x", "a"}} {
		errOut.Reset()
		if code := run(args, &out, &errOut); code != exitUsage || errOut.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want %d with a message", args, code, errOut.String(), exitUsage)
		}
	}
	if code := run([]string{"--state", filepath.Join(t.TempDir(), "s.json"), "/no/such/file"}, &out, &errOut); code != exitFailed {
		t.Errorf("missing file: exit %d, want %d", code, exitFailed)
	}
}

func TestStateFile(t *testing.T) {
	s := &stateFile{path: filepath.Join(t.TempDir(), "dir", "pending.json")}
	n := 0
	mint := func() string { n++; return "key-" + strings.Repeat("x", n) }
	k1, err := s.keyFor("a", mint)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := s.keyFor("a", mint)
	k3, _ := s.keyFor("b", mint)
	if k1 != k2 || k1 == k3 || n != 2 {
		t.Fatalf("keys %s %s %s after %d mints", k1, k2, k3, n)
	}
	if err := s.forget("a"); err != nil {
		t.Fatal(err)
	}
	if k4, _ := s.keyFor("a", mint); k4 == k1 {
		t.Fatal("a forgotten key came back")
	}
}

// The CLI against a real local stack: uploads, replays with the same key,
// resumes after being killed mid-PUT, and exits with the documented codes.
func TestCLIEndToEnd(t *testing.T) {
	testenv.RequireTools(t, "dynoxide", "versitygw")
	st, err := localstack.Start(context.Background(), localstack.Config{
		Template: filepath.Join("..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-cli", Bucket: "uploads-cli",
		Env: func(k string) (string, bool) {
			if k == "MAX_UPLOAD_BYTES" {
				return "3000000", true
			}
			return "", false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	bin := filepath.Join(dir, "upload")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state", "pending.json")
	cli := func(args ...string) *exec.Cmd {
		return exec.Command(bin, append([]string{"--api", st.APIURL, "--state", state, "--json"}, args...)...)
	}
	type line struct {
		Key, File string
		Replayed  bool
		Upload    struct{ UploadID, Status string }
	}
	runJSON := func(args ...string) line {
		t.Helper()
		out, err := cli(args...).Output()
		if err != nil {
			t.Fatalf("upload %q: %v\n%s", args, err, out)
		}
		var l line
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		return l
	}
	objects := func() int {
		out, err := testenv.S3Client(st.S3URL, nil).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Contents)
	}
	file := func(name string, size int) string {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	small := file("small.bin", 10_000)
	first := runJSON(small)
	if first.Upload.Status != "completed" || first.Replayed {
		t.Fatalf("first = %+v", first)
	}
	again := runJSON("--key", first.Key, small)
	if again.Upload.UploadID != first.Upload.UploadID || !again.Replayed || objects() != 1 {
		t.Fatalf("again = %+v, objects %d", again, objects())
	}

	// Killed mid-PUT, then run again: the same key, one object.
	big := file("big.bin", 2_000_000)
	slow := cli("--limit-rate", "400000", big)
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	var stored string
	deadline := time.Now().Add(10 * time.Second)
	for stored == "" && time.Now().Before(deadline) {
		raw, _ := os.ReadFile(state)
		var entries map[string]pendingEntry
		if json.Unmarshal(raw, &entries) == nil {
			for _, e := range entries {
				stored = e.Key
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // well into the five-second PUT
	_ = slow.Process.Kill()
	_ = slow.Wait()
	if stored == "" || objects() != 1 {
		t.Fatalf("before the rerun: stored key %q, %d objects", stored, objects())
	}
	resumed := runJSON(big)
	if resumed.Key != stored || resumed.Upload.Status != "completed" || objects() != 2 {
		t.Fatalf("resumed = %+v (stored key %s), objects %d", resumed, stored, objects())
	}
	if raw, _ := os.ReadFile(state); strings.Contains(string(raw), stored) {
		t.Error("the finished upload's key is still in the state file")
	}

	// Exit codes: rejected by the server, and retries exhausted.
	tooBig := file("huge.bin", 3_000_001)
	if err := cli(tooBig).Run(); exitCode(err) != exitRejected {
		t.Errorf("too large: %v, want exit %d", err, exitRejected)
	}
	port, _ := services.FreePort()
	down := exec.Command(bin, "--api", "http://127.0.0.1:"+strconv.Itoa(port), "--state", state, "--max-attempts", "2", small)
	if err := down.Run(); exitCode(err) != exitExhausted {
		t.Errorf("API down: %v, want exit %d", err, exitExhausted)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}
