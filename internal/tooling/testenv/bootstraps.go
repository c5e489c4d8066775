package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// function is one of the template's functions: its logical id (the
// directory make build gives its bootstrap) and its package under
// functions/.
type function struct{ logicalID, dir string }

var functions = []function{
	{"PresignFunction", "api"}, {"FinalizeFunction", "finalize"}, {"EventsFunction", "events"},
}

// built holds the bootstraps of each architecture, built on first use.
var built struct {
	mu    sync.Mutex
	archs map[string]*bootstrapDir
}

type bootstrapDir struct {
	once sync.Once
	dir  string
	err  error
}

// Bootstraps returns a directory that holds <LogicalId>/bootstrap for
// each function, laid out as make build lays out .build/<arch> (what
// devstack.Config.BootstrapDir and make dev's BOOTSTRAP_DIR name), and
// built as it builds them (LAMBDA_FLAGS, CGO off, linux) for arch: ""
// is this machine's, which run here under the emulator. Each arch is
// built once per test binary, when a test first asks, into a directory
// that Main removes.
func Bootstraps(t testing.TB, arch string) string {
	t.Helper()
	if arch == "" {
		arch = runtime.GOARCH
	}
	built.mu.Lock()
	if built.archs == nil {
		built.archs = map[string]*bootstrapDir{}
	}
	b := built.archs[arch]
	if b == nil {
		b = &bootstrapDir{}
		built.archs[arch] = b
	}
	built.mu.Unlock()
	b.once.Do(func() { b.dir, b.err = buildBootstraps(arch) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.dir
}

// buildBootstraps builds every function for arch, in one go build, into a
// new temporary directory.
func buildBootstraps(arch string) (string, error) {
	dir, err := os.MkdirTemp("", "onceupload-bootstraps-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", dir + string(filepath.Separator)}
	for _, fn := range functions {
		args = append(args, "github.com/onceupload/onceupload/functions/"+fn.dir)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("build the bootstraps for linux/%s: %v\n%s", arch, err, msg)
	}
	for _, fn := range functions {
		if err := os.Mkdir(filepath.Join(dir, fn.logicalID), 0o755); err != nil {
			return dir, err
		}
		if err := os.Rename(filepath.Join(dir, fn.dir), filepath.Join(dir, fn.logicalID, "bootstrap")); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// removeBootstraps removes what Bootstraps built; Main calls it.
func removeBootstraps() {
	built.mu.Lock()
	defer built.mu.Unlock()
	for _, b := range built.archs {
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
	}
}
