package functions_test

import (
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// The bootstraps the tests run and measure are built once (testenv.Bootstraps)
// and removed at the end.
func TestMain(m *testing.M) { testenv.Main(m) }
