package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every name in the Makefile's MINIO_FLOWS names a test of the packages
// make test-minio runs them in: go test runs nothing, and says nothing,
// for a name that a rename left behind.
func TestMinIOFlowsNameTests(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var flows []string
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "MINIO_FLOWS := "); ok {
			flows = append(flows, strings.Split(strings.TrimPrefix(v, "$(MINIO_FLOWS)|"), "|")...)
		}
	}
	if len(flows) == 0 {
		t.Fatal("the Makefile sets no MINIO_FLOWS")
	}
	var tests []string
	for _, pkg := range []string{"internal/tooling/devstack", "pkg/client", "cmd/upload", "cmd/smoke"} {
		files, err := filepath.Glob(filepath.Join("..", "..", "..", pkg, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no tests in %s: %v", pkg, err)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllSubmatch(src, -1) {
				tests = append(tests, string(m[1]))
			}
		}
	}
	for _, flow := range flows {
		re, err := regexp.Compile("^(" + flow + ")$")
		if err != nil {
			t.Errorf("MINIO_FLOWS: %q: %v", flow, err)
			continue
		}
		found := false
		for _, name := range tests {
			found = found || re.MatchString(name)
		}
		if !found {
			t.Errorf("MINIO_FLOWS names %q, which is no test of internal/tooling/devstack, pkg/client, cmd/upload or cmd/smoke", flow)
		}
	}
}
