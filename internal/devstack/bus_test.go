package devstack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Close cuts short the POST of an event in flight, and its retries, rather
// than waiting out the POST's timeout: the events URL here never answers,
// or always refuses.
func TestCloseStopsEventPosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer bool
	}{{"never answers", false}, {"always 500", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var once sync.Once
			reached, release := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client hang up
				once.Do(func() { close(reached) })
				if tc.answer {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release) // before srv.Close, which waits for the handlers
			st := &Stack{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EventsURL: srv.URL}}
			st.ctx, st.cancel = context.WithCancel(context.Background())
			st.publish(Envelope{ID: "1", DetailType: "t", Source: "s", Detail: json.RawMessage(`{}`)}, "default")
			select {
			case <-reached:
			case <-time.After(5 * time.Second):
				t.Fatal("the event was not POSTed")
			}
			closed := make(chan error, 1)
			go func() { closed <- st.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not return within 5s of a POST in flight")
			}
		})
	}
}
