package functions_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bootstraps link no AWS SDK service package and no config loader:
// together they were 2.5 MB of each 9 MB binary, and a service package
// imported only for its types still links its endpoint tables. They reach
// DynamoDB and S3 through package awslite, which uses the SDK's signer,
// credentials and retryer. The linked symbols are checked too, in case a
// client comes in some other way.
func TestBootstrapsLinkNoServiceClient(t *testing.T) {
	banned := []string{"aws-sdk-go-v2/service/", "aws-sdk-go-v2/config", "aws-sdk-go-v2/feature/"}
	for _, fn := range []string{"presign", "finalize"} {
		t.Run(fn, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "./"+fn).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, b := range banned {
					if strings.Contains(dep, b) {
						t.Errorf("%s depends on %s", fn, dep)
					}
				}
			}
			bin := filepath.Join(t.TempDir(), "bootstrap")
			build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./"+fn)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			syms, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
			if err != nil {
				t.Fatalf("go tool nm: %v\n%s", err, syms)
			}
			for _, line := range strings.Split(string(syms), "\n") {
				f := strings.Fields(line)
				if len(f) < 3 {
					continue
				}
				sym := f[len(f)-1]
				if strings.Contains(sym, "aws-sdk-go-v2/service/") {
					t.Errorf("%s links %s", fn, sym)
				}
			}
		})
	}
}
