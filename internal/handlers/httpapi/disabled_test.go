package httpapi

import (
	"testing"
)

// POWERTOOLS_IDEMPOTENCY_DISABLED turns off pkg/idempotency's wrapper, for
// tests and local runs of functions built on it. The upload service uses
// its record store directly and never reads it: with the variable set, a
// create still claims its key and a retry is still answered from the
// record, so setting it where presign runs cannot create an upload twice.
func TestIdempotencyDisabledDoesNotTouchTheService(t *testing.T) {
	t.Setenv("POWERTOOLS_IDEMPOTENCY_DISABLED", "true")
	f := newFixture(t, nil)
	first := f.do(t, post(key, photo))
	wantStatus(t, first, 201, "")
	if f.store.Len() != 1 {
		t.Fatalf("store holds %d records after a create, want 1", f.store.Len())
	}
	replay := f.do(t, post(key, photo))
	wantStatus(t, replay, 201, "")
	if replay.Body != first.Body || replay.Headers["Idempotent-Replay"] != "true" || f.store.Len() != 1 {
		t.Fatalf("retry = %+v with %d records\nwant the first body with Idempotent-Replay: true, one record", replay, f.store.Len())
	}
}
