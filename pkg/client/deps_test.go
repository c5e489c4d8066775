package client

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that only uploads files links none of the server's AWS SDK
// clients: the client speaks HTTP and imports only package api.
func TestClientLinksNoAWSSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "aws-sdk-go-v2") || strings.Contains(dep, "smithy-go") || strings.Contains(dep, "aws-lambda-go") {
			t.Errorf("pkg/client depends on %s", dep)
		}
	}
}
