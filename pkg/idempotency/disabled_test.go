package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

func TestDisabled(t *testing.T) {
	ctx := context.Background()
	body := `{"orderId":"o-1","amount":1000}`
	for _, v := range []string{"true", "1", "TRUE", " yes ", "on", "t", "y"} {
		t.Run("disabled by "+v, func(t *testing.T) {
			t.Setenv(idempotency.DisabledEnv, v)
			h := newHarness(t, cached(0))
			for i := range 2 {
				if got := h.mustCall(t, newOrder("k-1", body)); got.Run != int64(i+1) {
					t.Fatalf("call %d = %+v, want run %d", i, got, i+1)
				}
			}
			h.mustCall(t, order{Body: body}) // no key: runs all the same
			h.wantCalls(t, "three calls", noCall)
			if h.runs.Load() != 3 || h.store.Len() != 0 {
				t.Fatalf("%d runs, %d records; want 3 and 0", h.runs.Load(), h.store.Len())
			}
		})
	}
	for _, v := range []string{"", "false", "0", "No", "off", "n", "f"} {
		t.Run("enabled by "+v, func(t *testing.T) {
			t.Setenv(idempotency.DisabledEnv, v)
			h := newHarness(t)
			h.mustCall(t, newOrder("k-1", body))
			if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 1 {
				t.Fatalf("retry = %+v, want a replay of run 1", got)
			}
			h.wantCalls(t, "fresh and replay", map[string]int{"Claim": 2, "Complete": 1})
		})
	}
	for _, v := range []string{"disabled", "2", "yes please"} {
		t.Run("refused: "+v, func(t *testing.T) {
			t.Setenv(idempotency.DisabledEnv, v)
			h := newHarness(t)
			_, err := h.call(ctx, newOrder("k-1", body))
			if err == nil || !strings.Contains(err.Error(), idempotency.DisabledEnv) {
				t.Fatalf("err = %v, want one naming %s", err, idempotency.DisabledEnv)
			}
			h.wantCalls(t, "a refused value", noCall)
			if h.runs.Load() != 0 {
				t.Fatalf("%d runs, want none", h.runs.Load())
			}
		})
	}
}

// The variable is read on every request, and the warning comes once per
// wrapped handler, through its Logger.
func TestDisabledPerRequestWarnedOnce(t *testing.T) {
	body := `{"orderId":"o-1","amount":1000}`
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newHarness(t, func(o *idempotency.HandlerOptions[order, receipt]) { o.Logger = logger })
	other := idempotency.MakeIdempotent(h.counted, h.fn, h.opts...)

	t.Setenv(idempotency.DisabledEnv, "true")
	for range 3 {
		h.mustCall(t, newOrder("k-1", body))
		if _, err := other(context.Background(), newOrder("k-2", body)); err != nil {
			t.Fatal(err)
		}
	}
	h.wantCalls(t, "disabled", noCall)
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 || strings.Count(logs.String(), idempotency.DisabledEnv) != 2 {
		t.Errorf("%d warnings, want one per wrapped handler:\n%s", n, logs.String())
	}

	t.Setenv(idempotency.DisabledEnv, "false")
	h.mustCall(t, newOrder("k-1", body))
	h.wantCalls(t, "enabled again", fresh)
	if got := h.mustCall(t, newOrder("k-1", body)); got.Run != 7 {
		t.Fatalf("replay = %+v, want run 7 (six disabled runs before it)", got)
	}
	var reused *idempotency.ConflictError
	if _, err := h.call(context.Background(), newOrder("k-1", `{}`)); !errors.As(err, &reused) {
		t.Fatalf("another request: %v, want a ConflictError", err)
	}
}
