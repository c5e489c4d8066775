package testenv

import (
	"net/http"
	"strings"
	"testing"
)

// The bus re-sends an event until it gets a 2xx: the same id again is one
// event; another id for the same upload is a second event.
func TestEventSinkCountsDistinctEventIDs(t *testing.T) {
	s := NewEventSink(t)
	send := func(id string) {
		t.Helper()
		body := `{"id":"` + id + `","detail-type":"Upload Completed","detail":{"uploadId":"u1"}}`
		resp, err := http.Post(s.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("the sink answered %d", resp.StatusCode)
		}
	}
	send("e1")
	send("e1") // a redelivery
	if got := s.Events()["u1"]; len(got) != 1 {
		t.Errorf("after one event sent twice: %q; want one event", got)
	}
	send("e2")
	if got := s.Events()["u1"]; len(got) != 2 {
		t.Errorf("after a second event: %q; want two", got)
	}
}
