package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
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
			st.publish(events.EventBridgeEvent{ID: "1", DetailType: "t", Source: "s", Detail: json.RawMessage(`{}`)}, "default")
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

// What the bus POSTs to the events URL is EventBridge's envelope as a
// target receives it, to the byte: consumers (examples/upload-events)
// decode it as aws-lambda-go's events.EventBridgeEvent. The id is a fresh
// random UUID, also PutEvents' EventId for the entry; the time is UTC to
// the second; an entry without resources has "resources":[].
func TestBusPostsTheEnvelope(t *testing.T) {
	t.Parallel()
	posted := make(chan []byte, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		posted <- body
	}))
	defer srv.Close()
	st := &Stack{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EventsURL: srv.URL}}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	defer st.Close()

	put := `{"Entries":[` +
		`{"Source":"onceupload","DetailType":"Upload Completed","EventBusName":"default","Detail":"{\"uploadId\":\"u1\",\"bytes\":3}"},` +
		`{"Source":"onceupload","DetailType":"Upload Aborted","EventBusName":"default","Resources":["arn:aws:s3:::b"],"Detail":"{\"uploadId\":\"u2\"}"}]}`
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(put))
	req.Header.Set("X-Amz-Target", "AWSEvents.PutEvents")
	answer := httptest.NewRecorder()
	st.handleEventBus(answer, req)
	var out struct{ Entries []struct{ EventId string } }
	if err := json.Unmarshal(answer.Body.Bytes(), &out); err != nil || answer.Code != 200 || len(out.Entries) != 2 {
		t.Fatalf("PutEvents: %d %s", answer.Code, answer.Body)
	}

	want := map[string]string{
		"Upload Completed": `{"version":"0","id":"ID","detail-type":"Upload Completed","source":"onceupload","account":"000000000000","time":"TIME","region":"us-east-1","resources":[],"detail":{"uploadId":"u1","bytes":3}}`,
		"Upload Aborted":   `{"version":"0","id":"ID","detail-type":"Upload Aborted","source":"onceupload","account":"000000000000","time":"TIME","region":"us-east-1","resources":["arn:aws:s3:::b"],"detail":{"uploadId":"u2"}}`,
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	second := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	ids := map[string]bool{}
	for range 2 {
		var body []byte
		select {
		case body = <-posted:
		case <-time.After(10 * time.Second):
			t.Fatal("an event was not POSTed")
		}
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatalf("POSTed %s: not an EventBridgeEvent: %v", body, err)
		}
		// Decoded as a consumer does and encoded again, it is the same.
		if again, _ := json.Marshal(ev); !bytes.Equal(again, body) {
			t.Errorf("POSTed\n %s\nas an EventBridgeEvent encodes\n %s", body, again)
		}
		var v struct{ ID, Time string }
		_ = json.Unmarshal(body, &v)
		if !uuid.MatchString(v.ID) || !second.MatchString(v.Time) {
			t.Errorf("POSTed id %q, time %q: want a random UUID and UTC to the second", v.ID, v.Time)
		}
		ids[v.ID] = true
		got := strings.Replace(strings.Replace(string(body), `"id":"`+v.ID+`"`, `"id":"ID"`, 1), `"time":"`+v.Time+`"`, `"time":"TIME"`, 1)
		if got != want[ev.DetailType] {
			t.Errorf("POSTed\n %s\nwant\n %s", got, want[ev.DetailType])
		}
	}
	if !ids[out.Entries[0].EventId] || !ids[out.Entries[1].EventId] || len(ids) != 2 {
		t.Errorf("PutEvents answered event ids %+v; the events POSTed have %v", out.Entries, ids)
	}
}
