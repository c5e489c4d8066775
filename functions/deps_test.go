package functions_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bootstraps link no AWS SDK service client and no config loader:
// together they were 2.5 MB of each 9 MB binary. They reach DynamoDB and
// S3 through package awslite, which uses the SDK's signer, credentials and
// retryer. S3's input and output types are used (they are cheap); its
// client is not, which only the linked symbols can tell.
func TestBootstrapsLinkNoServiceClient(t *testing.T) {
	banned := []string{
		"/service/dynamodb", "/service/sso", "/service/ssooidc", "/service/sts", "/service/signin",
		"aws-sdk-go-v2/config", "/feature/dynamodb/",
	}
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
				if strings.Contains(sym, "/service/s3.(*Client).") || strings.HasSuffix(sym, "/service/s3.New") ||
					strings.HasSuffix(sym, "/service/s3.NewFromConfig") || strings.Contains(sym, "/service/dynamodb") {
					t.Errorf("%s links %s", fn, sym)
				}
			}
		})
	}
}
