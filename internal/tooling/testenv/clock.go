package testenv

import (
	"time"

	"github.com/onceupload/onceupload/pkg/idempotency/storetest"
)

// Clock is a settable clock for the Now options of the stores and the
// service, safe for concurrent use: storetest's, which the store
// conformance cases advance.
type Clock = storetest.Clock

// NewClock returns a clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock { return storetest.NewClock(start) }
