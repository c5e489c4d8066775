package services_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// StartRIE takes a built bootstrap, and refuses to start without one: the
// emulator itself would start, and fail the first invocation instead.
func TestStartRIEWithoutABootstrap(t *testing.T) {
	testenv.RequireTools(t, "aws-lambda-rie")
	dir := t.TempDir()
	for _, bootstrap := range []string{filepath.Join(dir, "PresignFunction", "bootstrap"), dir} {
		p, err := services.StartRIE(context.Background(), services.RIEOptions{Bootstrap: bootstrap, Env: []string{"AWS_LAMBDA_FUNCTION_NAME=f"}})
		if err == nil {
			_ = p.Stop()
			t.Fatalf("StartRIE(%s) started", bootstrap)
		}
		if !strings.Contains(err.Error(), "no bootstrap at "+bootstrap) {
			t.Errorf("StartRIE(%s): %v; want the path named", bootstrap, err)
		}
	}
}
