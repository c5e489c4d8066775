package idempotency_test

import (
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

func TestNewIDIsFixedAndUnambiguous(t *testing.T) {
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'k'
	}
	ids := map[idempotency.ID]string{}
	for _, pair := range [][2]string{{"ab", "c"}, {"a", "bc"}, {"", "abc"}, {"t", string(long)}} {
		id := idempotency.NewID(pair[0], pair[1])
		if _, err := idempotency.ParseID(string(id)); err != nil {
			t.Errorf("NewID%q = %q: %v", pair, id, err)
		}
		if prev, dup := ids[id]; dup {
			t.Errorf("NewID%q collides with %s", pair, prev)
		}
		ids[id] = pair[0] + "|" + pair[1]
	}
	for _, bad := range []string{"", "ABCDEF0123456789abcdef0123456789", "0123", "g123456789abcdef0123456789abcdef"} {
		if _, err := idempotency.ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
}

// One Retry-After rule for every answer that carries it: round up to whole
// seconds, at least one.
func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{
		0: 1, -time.Second: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2,
		1500 * time.Millisecond: 2, 7 * time.Second: 7, 29*time.Second + time.Nanosecond: 30,
	} {
		if got := idempotency.RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", d, got, want)
		}
		if got := (&idempotency.InProgressError{RetryAfter: d}).RetryAfterSeconds(); got != want {
			t.Errorf("InProgressError{%s}.RetryAfterSeconds() = %d, want %d", d, got, want)
		}
	}
}
