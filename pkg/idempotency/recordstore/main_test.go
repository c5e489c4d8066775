package recordstore_test

import (
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

var (
	dynoxide = testenv.SharedDynoxide()
	dynalite = testenv.SharedDynalite()
)

func sharedDynoxide(t testing.TB) string { return dynoxide.Endpoint(t) }
func sharedDynalite(t testing.TB) string { return dynalite.Endpoint(t) }

func TestMain(m *testing.M) { testenv.Main(m, dynoxide, dynalite) }
