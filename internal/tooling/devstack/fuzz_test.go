package devstack

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzEncodeS3EventKey: whatever the key, the encoding uses only the
// characters S3 notifications do, and Lambda's decoding gives it back.
func FuzzEncodeS3EventKey(f *testing.F) {
	for _, seed := range []string{
		"uploads/abc123", "uploads/my photo.jpg", "uploads/a+b", "uploads/100%", "uploads/%2B", "uploads/été 🎉",
		"uploads/(1)~*_-.x", "a=b&c?d#e", " ", "+", "%", "%zz", "\x00\r\n\t", "\xff\xfe", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		enc := EncodeS3EventKey(key)
		if i := strings.IndexFunc(enc, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(".-*_/+%", r))
		}); i >= 0 {
			t.Fatalf("EncodeS3EventKey(%q) = %q: %q is not in S3's encoding alphabet", key, enc, enc[i])
		}
		back, err := url.QueryUnescape(enc)
		if err != nil || back != key {
			t.Fatalf("QueryUnescape(EncodeS3EventKey(%q) = %q) = %q, %v; want the key", key, enc, back, err)
		}
	})
}

// versityRecord is what a test reads back from a Versity (or MinIO) payload.
type versityRecord struct {
	EventSource string `json:"eventSource"`
	EventName   string `json:"eventName"`
	S3          struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key  string `json:"key"`
			ETag string `json:"eTag"`
		} `json:"object"`
	} `json:"s3"`
}

// FuzzTranslateS3Event: any payload the translator accepts becomes an
// event in AWS's shape that Lambda's events.S3Event decodes, one record
// per Versity record, with the key (MinIO's, query-escaped), bucket and event
// name preserved.
func FuzzTranslateS3Event(f *testing.F) {
	for _, name := range []string{"versity-object-created.json", "versity-test-event.json", "minio-object-created.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, seed := range []string{
		`{"Records":[{"eventName":"s3:ObjectCreated:Put","eventTime":"2026-11-29T12:00:00Z","s3":{"bucket":{"name":"b"},"object":{"key":"uploads/a b+c%d é","size":3,"eTag":"\"abc\""}}}]}`,
		`{"Records":[{"eventName":"s3:ObjectCreated:Put","eventTime":"not a time","s3":{"object":{"key":"k"}}},{"eventName":"s3:ObjectCreated:Copy","s3":{"object":{"key":"\u0000\n"}}}]}`,
		`{"Records":[{"eventName":"ObjectCreated:Put","eventTime":"2026-11-29T12:00:00.123456789+14:00","s3":{"object":{"key":"k","versionId":null}}}]}`,
		`{"Event":"s3:TestEvent","Records":[{"eventName":"s3:ObjectCreated:Put"}]}`,
		`{"Records":[]}`, `{"Records":[null]}`, `{"Records":{}}`, `null`, `[]`, ``,
		"{\"Records\":[{\"s3\":{\"object\":{\"key\":\"\xff\"}}}]}",
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, payload []byte) {
		ev, ok, err := TranslateS3Event(payload, now, seqID())
		if err != nil || !ok {
			return
		}
		var in struct {
			Records []versityRecord `json:"Records"`
		}
		if err := json.Unmarshal(payload, &in); err != nil {
			t.Fatalf("translated a payload that does not decode: %v", err)
		}
		if len(ev.Records) != len(in.Records) {
			t.Fatalf("%d records became %d", len(in.Records), len(ev.Records))
		}
		raw, err := json.Marshal(ev) // as the front door sends it
		if err != nil {
			t.Fatalf("encode the translated event: %v", err)
		}
		var got events.S3Event
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("the translated event does not decode as events.S3Event (Lambda would refuse it): %v\nin  %s\nout %s", err, payload, raw)
		}
		for i, r := range got.Records {
			want := in.Records[i]
			if want.EventSource == minioEventSource {
				want.S3.Object.Key, _ = url.QueryUnescape(want.S3.Object.Key)
			}
			if r.S3.Object.URLDecodedKey != want.S3.Object.Key {
				t.Errorf("record %d: key %q arrives as %q", i, want.S3.Object.Key, r.S3.Object.URLDecodedKey)
			}
			if r.S3.Bucket.Name != want.S3.Bucket.Name || r.EventName != strings.TrimPrefix(want.EventName, "s3:") || r.EventSource != "aws:s3" {
				t.Errorf("record %d: bucket %q, event %q, source %q; want %q, %q", i, r.S3.Bucket.Name, r.EventName, r.EventSource,
					want.S3.Bucket.Name, strings.TrimPrefix(want.EventName, "s3:"))
			}
			if strings.HasPrefix(r.S3.Object.ETag, `"`) || strings.HasSuffix(r.S3.Object.ETag, `"`) {
				t.Errorf("record %d: ETag %q keeps its quotes", i, r.S3.Object.ETag)
			}
			if r.EventTime.IsZero() {
				t.Errorf("record %d: no event time", i)
			}
		}
	})
}
