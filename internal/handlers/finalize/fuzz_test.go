package finalize

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// The live upload of the fuzz service: tenant-a's key
// fuzz-finalize-key-0001, 1234 bytes, random half 0xab…, so seed events
// can name its object.
const (
	fuzzBucket   = "uploads-test"
	fuzzLiveKey  = "uploads/9a957cee14a88cb154181202cd4c31f8abababababababababababababababab"
	fuzzLiveSize = 1234
)

// liveService is the real upload service on an in-memory store (which is
// never unavailable) with one pending upload, whose object, of its claimed
// size, is all the bucket holds.
func liveService(t *testing.T, presigner upload.Presigner) *upload.Service {
	t.Helper()
	liveBucket := &s3fake.Client{}
	liveBucket.Put(fuzzLiveKey, s3.HeadObjectOutput{ContentLength: aws.Int64(fuzzLiveSize), ETag: aws.String(`"e"`)})
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := testenv.NewClock(now).Now
	store := memorystore.New(func(o *idempotency.Options) { o.Now = clock })
	cfg := upload.Config{Bucket: fuzzBucket, Prefix: "uploads/", PresignTTL: 15 * time.Minute, MaxUploadBytes: 1 << 20}
	svc := upload.New(store, presigner, liveBucket, cfg, func(o *upload.Options) {
		o.Random, o.Logger = bytes.NewReader(bytes.Repeat([]byte{0xab}, 16)), quiet()
	})
	reply, err := svc.Create(context.Background(), "tenant-a", "fuzz-finalize-key-0001", api.CreateRequest{
		Filename: "a.txt", ContentType: "text/plain", Size: fuzzLiveSize,
		SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	})
	if err != nil {
		t.Fatal(err)
	}
	if "uploads/"+reply.UploadID != fuzzLiveKey {
		t.Fatalf("live upload is %s, want %s", reply.UploadID, fuzzLiveKey)
	}
	return svc
}

// FuzzHandleS3Event feeds the handler any JSON that decodes as an S3
// event. Every ObjectCreated record reaches the service once, in order,
// with its key URL-decoded; other records never do. With the real service
// on a store that cannot fail, no event, however malformed, makes the
// handler return an error (which would only make Lambda retry in vain).
func FuzzHandleS3Event(f *testing.F) {
	for _, path := range []string{
		filepath.Join("testdata", "s3-event-several-records.json"),
		filepath.Join("..", "..", "..", "events", "finalize-object-created.json"),
	} {
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	record := func(name, bucket, key string, size int64) string {
		return fmt.Sprintf(`{"eventName":%q,"eventTime":"2026-11-29T12:00:01.000Z","s3":{"bucket":{"name":%q},"object":{"key":%q,"size":%d,"eTag":"e"}}}`,
			name, bucket, key, size)
	}
	for _, seed := range []string{
		`{"Records":[` + record("ObjectCreated:Put", fuzzBucket, fuzzLiveKey, fuzzLiveSize) + `]}`,
		`{"Records":[` + record("ObjectCreated:Put", fuzzBucket, fuzzLiveKey, fuzzLiveSize) + `,` +
			record("ObjectCreated:Put", fuzzBucket, fuzzLiveKey, fuzzLiveSize) + `]}`,
		`{"Records":[` + record("ObjectCreated:Put", fuzzBucket, fuzzLiveKey, fuzzLiveSize+1) + `]}`,
		`{"Records":[` + record("ObjectCreated:Copy", "other-bucket", fuzzLiveKey, fuzzLiveSize) + `]}`,
		`{"Records":[` + record("ObjectRemoved:Delete", fuzzBucket, fuzzLiveKey, fuzzLiveSize) + `]}`,
		`{"Records":[` + record("ObjectCreated:Put", fuzzBucket, "uploads%2F"+fuzzLiveKey[8:], fuzzLiveSize) + `]}`,
		`{"Records":[` + record("ObjectCreated:Put", fuzzBucket, "elsewhere/my+photo+%28%E2%9C%93%29.jpg", 5) + `]}`,
		`{"Records":[` + record("ObjectCreated:Put", fuzzBucket, "uploads/"+strings.Repeat("0", 64), 1) + `]}`,
		`{"Records":[null,{},{"eventName":"ObjectCreated:Put"}]}`,
		`{"Records":[]}`, `{}`, `null`,
	} {
		f.Add([]byte(seed))
	}
	presigner := upload.NewPresigner(s3.New(s3.Options{Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}), fuzzBucket)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ev events.S3Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return // Lambda's runtime refuses it before the handler runs
		}
		ctx := context.Background()
		rec := &recorder{}
		if err := (&Handler{Service: rec, Logger: quiet()}).Handle(ctx, ev); err != nil {
			t.Fatalf("Handle with a service that never fails: %v", err)
		}
		var want []upload.ObjectCreated
		for _, r := range ev.Records {
			if !strings.HasPrefix(r.EventName, "ObjectCreated:") {
				continue
			}
			key, err := url.QueryUnescape(r.S3.Object.Key)
			if err != nil {
				t.Fatalf("decoded an event whose key %q does not unescape", r.S3.Object.Key)
			}
			want = append(want, upload.ObjectCreated{Bucket: r.S3.Bucket.Name, Key: key, Size: r.S3.Object.Size, ETag: r.S3.Object.ETag, Time: r.EventTime})
		}
		if len(rec.got) != len(want) {
			t.Fatalf("the service got %d records, want the %d ObjectCreated ones", len(rec.got), len(want))
		}
		for i := range want {
			if g, w := rec.got[i], want[i]; g.Bucket != w.Bucket || g.Key != w.Key || g.Size != w.Size || g.ETag != w.ETag || !g.Time.Equal(w.Time) {
				t.Fatalf("record %d reached the service as %+v, want %+v", i, g, w)
			}
		}

		if err := (&Handler{Service: liveService(t, presigner), Logger: quiet()}).Handle(ctx, ev); err != nil {
			t.Fatalf("Handle returned an error for records it cannot use: %v", err)
		}
	})
}
