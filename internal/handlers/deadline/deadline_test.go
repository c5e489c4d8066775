package deadline

import (
	"context"
	"testing"
	"time"
)

func TestWorkKeepsAReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		remaining, reserve time.Duration
	}{
		{10 * time.Second, time.Second},           // a tenth, capped at MaxReserve
		{30 * time.Second, time.Second},           // capped
		{3 * time.Second, 300 * time.Millisecond}, // a tenth
		{500 * time.Millisecond, MinReserve},      // at least MinReserve
	} {
		end := time.Now().Add(tc.remaining)
		parent, cancel := context.WithDeadline(context.Background(), end)
		ctx, stop := Work(parent)
		got, ok := ctx.Deadline()
		stop()
		cancel()
		if !ok {
			t.Fatalf("%s remaining: no deadline", tc.remaining)
		}
		// Work reads the clock after end was set: allow a few ms of drift.
		if reserve := end.Sub(got); reserve < tc.reserve-5*time.Millisecond || reserve > tc.reserve+5*time.Millisecond {
			t.Errorf("%s remaining: reserve %s, want %s", tc.remaining, reserve, tc.reserve)
		}
	}
	ctx, stop := Work(context.Background())
	defer stop()
	if _, ok := ctx.Deadline(); ok {
		t.Error("no deadline given, one made up")
	}
}
