package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Script runs a test's driver (node e2e.mjs <scenario>, which starts a
// browser) in dir, with env added to the test's environment, in a process
// group of its own, so that a timeout (limit) kills it with everything it
// started. It logs the driver's stderr and time, fails t if the driver
// fails, and returns its stdout.
func Script(t testing.TB, dir string, limit time.Duration, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	what := strings.Join(append([]string{filepath.Base(name)}, args...), " ")
	t.Logf("%s: %s\n%s", what, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return stdout.Bytes()
}

// Objects lists bucket: each object's key and size.
func Objects(t testing.TB, client *s3.Client, bucket string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list objects: %v", err)
		}
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return out
}

// NewObjects is what bucket holds now and did not in before (Objects), sorted.
func NewObjects(t testing.TB, client *s3.Client, bucket string, before map[string]int64) []string {
	t.Helper()
	var added []string
	for k := range Objects(t, client, bucket) {
		if _, ok := before[k]; !ok {
			added = append(added, k)
		}
	}
	slices.Sort(added)
	return added
}

// CopyFile copies the file at from to to, failing t if it cannot.
func CopyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadJSON decodes the JSON file at path into v, failing t if it cannot.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
