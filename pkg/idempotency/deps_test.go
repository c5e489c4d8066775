package idempotency_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// pkg/ is a library that stands on its own: adopters cannot import the
// server's internal packages, so nothing under pkg/ may depend on one.
// Two do still, the engine this package wraps (its move into pkg/ is the
// open part of issue 42); no other may be added, and the keyheader
// parser, which pkg/api and so pkg/client use, depends on none.
func TestPkgDependsOnNoNewInternalPackage(t *testing.T) {
	stillEngine := []string{
		"github.com/onceupload/onceupload/internal/recordstore",
		"github.com/onceupload/onceupload/internal/recordstore/dynamostore",
	}
	out, err := exec.Command("go", "list", "-deps", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/onceupload/onceupload/internal/") && !slices.Contains(stillEngine, dep) {
			t.Errorf("a package under pkg/ depends on %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "./keyheader", "../api").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/onceupload/onceupload/internal/") || dep == "github.com/onceupload/onceupload/pkg/idempotency" {
			t.Errorf("pkg/api or keyheader depends on %s", dep)
		}
	}
}
