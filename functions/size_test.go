package functions_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// maxBootstrapBytes is the size budget of each bootstrap: a bigger binary
// is slower to fetch and start on every cold start.
const maxBootstrapBytes = 16_000_000

// Each bootstrap, built as the Makefile builds it (linux/arm64, CGO off,
// -tags lambda.norpc -trimpath -ldflags='-s -w'), fits the size budget. The
// functions use the SDK's DynamoDB and S3 clients; this keeps what they
// link from growing unnoticed.
func TestBootstrapSizeBudget(t *testing.T) {
	dir := testenv.Bootstraps(t, "arm64")
	for _, fn := range []string{"PresignFunction", "FinalizeFunction", "EventsFunction"} {
		t.Run(fn, func(t *testing.T) {
			info, err := os.Stat(filepath.Join(dir, fn, "bootstrap"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s bootstrap (linux/arm64): %d bytes (%.1f MB), budget %d", fn, info.Size(), float64(info.Size())/1e6, maxBootstrapBytes)
			if info.Size() > maxBootstrapBytes {
				t.Errorf("%s bootstrap is %d bytes, over the budget of %d", fn, info.Size(), maxBootstrapBytes)
			}
		})
	}
}
