package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/pkg/api"
)

// The local event bus: the EventBridge PutEvents call, served so that the
// events function's own EventBridge client (in-process or a bootstrap
// under the emulator) puts its events here. Each event is logged and, when
// Config.EventsURL is set, POSTed there as EventBridge delivers to a
// target: the event's JSON envelope, retried until a 2xx or the stack
// stops. Rules and other targets are not emulated.

// putEventsEntry is one entry of a PutEvents request.
type putEventsEntry struct {
	Source       string   `json:"Source"`
	DetailType   string   `json:"DetailType"`
	Detail       string   `json:"Detail"`
	EventBusName string   `json:"EventBusName"`
	Resources    []string `json:"Resources"`
}

func (st *Stack) handleEventBus(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, kind, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": kind, "message": msg})
	}
	if target := r.Header.Get("X-Amz-Target"); target != "AWSEvents.PutEvents" {
		fail(http.StatusBadRequest, "UnknownOperationException", "the local event bus serves PutEvents only, not "+target)
		return
	}
	var in struct{ Entries []putEventsEntry }
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		fail(http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		fail(http.StatusBadRequest, "ValidationException", fmt.Sprintf("%d entries: PutEvents takes 1 to 10", len(in.Entries)))
		return
	}
	type result struct {
		EventID      string `json:"EventId,omitempty"`
		ErrorCode    string `json:"ErrorCode,omitempty"`
		ErrorMessage string `json:"ErrorMessage,omitempty"`
	}
	out := struct {
		Entries          []result
		FailedEntryCount int
	}{}
	for _, e := range in.Entries {
		if e.Source == "" || e.DetailType == "" || !json.Valid([]byte(e.Detail)) || !bytes.HasPrefix(bytes.TrimSpace([]byte(e.Detail)), []byte("{")) {
			out.Entries = append(out.Entries, result{ErrorCode: "MalformedDetail", ErrorMessage: "source, detail-type and a JSON object detail are required"})
			out.FailedEntryCount++
			continue
		}
		// The envelope EventBridge hands a target, its time to the second
		// as EventBridge gives it.
		env := events.EventBridgeEvent{
			Version: "0", ID: newEventID(), DetailType: e.DetailType, Source: e.Source, AccountID: localAccountID,
			Time: time.Now().UTC().Truncate(time.Second), Region: Region, Resources: e.Resources, Detail: json.RawMessage(e.Detail),
		}
		if env.Resources == nil {
			env.Resources = []string{}
		}
		out.Entries = append(out.Entries, result{EventID: env.ID})
		st.publish(env, e.EventBusName)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

// publish logs an event and hands it to Config.EventsURL.
func (st *Stack) publish(env events.EventBridgeEvent, bus string) {
	var d api.EventDetail
	_ = json.Unmarshal(env.Detail, &d)
	st.cfg.Logger.Info("event", "detailType", env.DetailType, "source", env.Source, "bus", bus, "uploadId", d.UploadID,
		"filename", d.Filename, "bytes", d.Bytes, "id", env.ID)
	if st.cfg.EventsURL == "" {
		return
	}
	body, err := json.Marshal(env)
	if err != nil {
		st.cfg.Logger.Error("event: cannot encode", "error", err)
		return
	}
	st.pending.Add(1)
	go st.post(body, env.ID)
}

// newEventID is a random (version 4) UUID, the form of EventBridge's event
// ids.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// post delivers one event to EventsURL until it is taken (a 2xx), with
// capped exponential backoff, or the stack stops.
func (st *Stack) post(body []byte, id string) {
	defer st.pending.Done()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(st.ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.cfg.EventsURL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		status := 0
		if err == nil {
			status = resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err == nil && status/100 == 2 {
			return
		}
		if st.ctx.Err() != nil {
			st.cfg.Logger.Error("event: not delivered before the stack stopped", "id", id)
			return
		}
		st.cfg.Logger.Warn("event: delivery failed; retrying", "id", id, "url", st.cfg.EventsURL, "attempt", attempt, "status", status, "error", err)
		select {
		case <-time.After(wait):
		case <-st.ctx.Done():
			st.cfg.Logger.Error("event: not delivered before the stack stopped", "id", id)
			return
		}
		wait = min(wait*2, 10*time.Second)
	}
}
