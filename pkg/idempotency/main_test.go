package idempotency_test

import (
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// The DynamoDB servers the tests share: dynalite drops the old item a
// refused conditional write should bring back, dynoxide does not. Redis is
// BenchmarkStore's.
var dynoxide, dynalite, redis = testenv.SharedDynoxide(), testenv.SharedDynalite(), testenv.SharedRedis()

func TestMain(m *testing.M) { testenv.Main(m, dynoxide, dynalite, redis) }
