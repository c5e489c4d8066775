package testenv

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// EventSink is an events endpoint for a local stack (devstack.Config
// EventsURL): it takes every upload event it is given and counts them by
// upload id, so that a test can say "exactly one event per upload". It
// counts distinct events, by their id: the stack's bus sends an event
// again until it gets a 2xx (an attempt that timed out may have arrived),
// and its own redelivery of one event is not a doubled event; two events
// (two ids) for one upload are.
type EventSink struct {
	URL string

	mu      sync.Mutex
	events  map[string][]string // upload id → detail-types, in arrival order, one per event id
	seen    map[string]bool     // event ids taken
	changed chan struct{}       // closed (and replaced) on each event
}

// NewEventSink starts an EventSink, stopped when t ends (after the stack,
// if the stack was started later: cleanups run last first).
func NewEventSink(t testing.TB) *EventSink {
	t.Helper()
	s := &EventSink{events: map[string][]string{}, seen: map[string]bool{}, changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *EventSink) serve(w http.ResponseWriter, r *http.Request) {
	var e struct {
		ID         string          `json:"id"`
		DetailType string          `json:"detail-type"`
		Detail     api.EventDetail `json:"detail"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &e); err != nil || e.Detail.UploadID == "" {
		http.Error(w, "not an upload event", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.ID != "" && s.seen[e.ID] {
		return // a redelivery (the bus did not see our 2xx in time): one event
	}
	if e.ID != "" {
		s.seen[e.ID] = true
	}
	s.events[e.Detail.UploadID] = append(s.events[e.Detail.UploadID], e.DetailType)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Events returns the detail-types of the events of each upload so far.
func (s *EventSink) Events() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]string, len(s.events))
	for id, types := range s.events {
		out[id] = append([]string(nil), types...)
	}
	return out
}

// WaitFor waits until each of uploadIDs has had an event, and fails t if
// that takes more than a minute (the stack reads its stream four times a
// second: only a lost event takes that long).
func (s *EventSink) WaitFor(t testing.TB, uploadIDs ...string) {
	t.Helper()
	give := time.NewTimer(time.Minute)
	defer give.Stop()
	for {
		s.mu.Lock()
		var missing []string
		for _, id := range uploadIDs {
			if len(s.events[id]) == 0 {
				missing = append(missing, id)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-changed:
		case <-give.C:
			t.Fatalf("no event after a minute for uploads %v", missing)
		}
	}
}

// OneEach waits for an event of each upload of uploads (upload id → what
// made it, for messages) and of last, then fails t unless each of uploads
// had exactly one event, of detailType, and no upload besides them and
// last had any. Make last an upload completed after all the others: the
// stack reads its table's stream in order, so once last's event is in,
// any second event of the others has come too.
func (s *EventSink) OneEach(t testing.TB, uploads map[string]string, detailType, last string) {
	t.Helper()
	ids := []string{last}
	for id := range uploads {
		ids = append(ids, id)
	}
	s.WaitFor(t, ids...)
	for id, types := range s.Events() {
		made, ok := uploads[id]
		switch {
		case id == last:
		case !ok:
			t.Errorf("events %q for upload %s, which none of the uploads checked is", types, id)
		case len(types) != 1 || types[0] != detailType:
			t.Errorf("%s: upload %s had events %q; want one %q", made, id, types, detailType)
		}
	}
}
