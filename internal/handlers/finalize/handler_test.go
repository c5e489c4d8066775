package finalize

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/onceupload/onceupload/internal/upload"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// recorder is a fake service that records what the handler asks of it.
type recorder struct {
	got  []upload.ObjectCreated
	fail map[string]error // by key
}

func (r *recorder) Finalize(_ context.Context, obj upload.ObjectCreated) (upload.Outcome, error) {
	r.got = append(r.got, obj)
	if err := r.fail[obj.Key]; err != nil {
		return "", err
	}
	return upload.OutcomeCompleted, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func loadEvent(t *testing.T, path string) events.S3Event {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.S3Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ev
}

// An event as AWS shapes it: several records, URL-encoded keys ('+' for a
// space, %2B for '+', UTF-8 and '%' escaped), and a record that is not
// ObjectCreated. The handler passes decoded keys on and skips the rest.
func TestHandleDecodesAWSEvents(t *testing.T) {
	ev := loadEvent(t, filepath.Join("testdata", "s3-event-several-records.json"))
	rec := &recorder{}
	if err := (&Handler{Service: rec, Logger: quiet()}).Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(rec.got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "s3-event-several-records.decoded.json")
	if *update {
		_ = os.WriteFile(golden, append(got, '\n'), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("decoded records:\n%s\nwant\n%s", got, want)
	}
	if len(rec.got) != 3 || rec.got[1].Key != "uploads/my photo (2).jpg" || rec.got[2].Key != "uploads/a+b%c été.txt" {
		t.Errorf("keys not decoded as AWS encodes them: %+v", rec.got)
	}
}

// A transient failure of one record fails the invocation (so Lambda
// retries it) after every other record was still handled.
func TestHandleReturnsTransientErrors(t *testing.T) {
	ev := loadEvent(t, filepath.Join("testdata", "s3-event-several-records.json"))
	boom := errors.New("store unavailable")
	rec := &recorder{fail: map[string]error{"uploads/my photo (2).jpg": boom}}
	err := (&Handler{Service: rec, Logger: quiet()}).Handle(context.Background(), ev)
	if !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want the transient error", err)
	}
	if len(rec.got) != 3 {
		t.Errorf("handled %d records, want all 3 ObjectCreated records", len(rec.got))
	}
}

// The sample event shipped for `sam local invoke` decodes as AWS's shape.
func TestSampleEvent(t *testing.T) {
	ev := loadEvent(t, filepath.Join("..", "..", "..", "events", "finalize-object-created.json"))
	rec := &recorder{}
	if err := (&Handler{Service: rec, Logger: quiet()}).Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 || rec.got[0].Size != 48213 || rec.got[0].ETag == "" || rec.got[0].Time.IsZero() {
		t.Fatalf("decoded %+v", rec.got)
	}
}
