// Package deadline bounds the work of one Lambda invocation, so that a
// hung dependency yields the function's own answer (a 503 with
// Retry-After, an error Lambda retries) instead of Lambda killing the
// function at its timeout and the caller getting a bare gateway error.
package deadline

import (
	"context"
	"time"
)

// Reserve is what Work keeps back from the invocation's deadline to answer
// and clean up: a tenth of the remaining time, between MinReserve and
// MaxReserve.
const (
	MinReserve = 100 * time.Millisecond
	MaxReserve = time.Second
)

// Work returns ctx bounded to end Reserve before ctx's own deadline; every
// DynamoDB and S3 call made with it gives up in time. Without a deadline
// (a caller that is not Lambda), ctx is returned unbounded.
func Work(ctx context.Context) (context.Context, context.CancelFunc) {
	end, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := min(max(time.Until(end)/10, MinReserve), MaxReserve)
	return context.WithDeadline(ctx, end.Add(-reserve))
}
