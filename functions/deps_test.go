package functions_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The bootstraps import no AWS SDK service package, config loader or
// feature package, directly or not, as `go list -deps` reports for the
// build the Makefile makes: together these were 2.5 MB of each 9 MB binary,
// and a service package imported only for its types still links its
// endpoint tables. The functions reach DynamoDB and S3 through package
// awslite, which uses the SDK's signer, credentials and retryer. A package
// outside the import graph cannot be linked, so the graph alone decides.
func TestBootstrapsLinkNoServiceClient(t *testing.T) {
	banned := []string{"aws-sdk-go-v2/service/", "aws-sdk-go-v2/config", "aws-sdk-go-v2/feature/"}
	for _, fn := range []string{"presign", "finalize"} {
		t.Run(fn, func(t *testing.T) {
			// The graph of the binary the Makefile builds: its tags and GOOS.
			list := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "./"+fn)
			list.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
			out, err := list.CombinedOutput()
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
		})
	}
}
