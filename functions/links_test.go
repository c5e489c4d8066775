package functions_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// serviceClient matches an SDK service client's package (not its types,
// schemas or internal packages): linking it runs its endpoint tables' init
// on every cold start.
var serviceClient = regexp.MustCompile(`^github\.com/aws/aws-sdk-go-v2/service/([^/]+)$`)

// linkedClients lists the service clients pkg links, built as the Makefile
// builds the bootstraps (linux/arm64, -tags lambda.norpc).
func linkedClients(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var clients []string
	for _, p := range strings.Fields(string(out)) {
		if m := serviceClient.FindStringSubmatch(p); m != nil && m[1] != "internal" {
			clients = append(clients, m[1])
		}
	}
	slices.Sort(clients)
	return clients
}

// Each function links the service clients it calls and those that
// config.LoadDefaultConfig brings (STS, SSO and the like, for credentials),
// and no other: api and finalize no EventBridge, events no DynamoDB or
// S3 client. The set is exact, so a client that leaves a function must
// leave this table too, and one that comes back fails it.
func TestFunctionsLinkOnlyTheClientsTheyCall(t *testing.T) {
	loader := linkedClients(t, "github.com/aws/aws-sdk-go-v2/config")
	for _, c := range []struct {
		fn    string
		calls []string
	}{
		{"api", []string{"dynamodb", "s3"}},
		{"finalize", []string{"dynamodb", "s3"}},
		// The stream's records are decoded by pkg/idempotency/recordstore and
		// shaped by internal/upload/uploadrecord, neither of which holds a
		// client: the DynamoDB store is in recordstore/dynamostore, the S3
		// service in internal/upload.
		{"events", []string{"eventbridge"}},
	} {
		t.Run(c.fn, func(t *testing.T) {
			want := slices.Concat(c.calls, loader)
			slices.Sort(want)
			want = slices.Compact(want)
			if got := linkedClients(t, "github.com/onceupload/onceupload/functions/"+c.fn); !slices.Equal(got, want) {
				t.Errorf("functions/%s links the service clients %v, want %v (it calls %v; config.LoadDefaultConfig brings %v)",
					c.fn, got, want, c.calls, loader)
			}
		})
	}
}
