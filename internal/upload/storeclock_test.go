package upload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// clockPresigner signs at its clock's time, as the SDK's signer signs at
// the real one, and records each URL's lifetime.
type clockPresigner struct {
	clock    *testenv.Clock
	lifetime []time.Duration
}

func (p *clockPresigner) PresignPutObject(_ context.Context, in *upload.PresignInput) (*v4.PresignedHTTPRequest, error) {
	p.lifetime = append(p.lifetime, in.Expires)
	return &v4.PresignedHTTPRequest{Method: "PUT", URL: fmt.Sprintf("https://bucket.example/%s?X-Amz-Date=%s&X-Amz-Expires=%d",
		in.Key, p.clock.Now().UTC().Format("20060102T150405Z"), int(in.Expires.Seconds()))}, nil
}

func (p *clockPresigner) PresignUploadPart(context.Context, *upload.PresignInput) (*v4.PresignedHTTPRequest, error) {
	return nil, fmt.Errorf("no multipart here")
}

// The service is told its keys' lifetime and the time once, by its store:
// a URL lasts no longer than the store keeps the claim, and a replay
// re-signs once the store's clock has passed the recorded URL's expiry.
func TestServiceTakesTTLAndClockFromItsStore(t *testing.T) {
	ctx := context.Background()
	req := api.CreateRequest{Filename: "a.txt", ContentType: "text/plain", Size: 1, SHA256: strings.Repeat("ab", 32)}
	service := func(presignTTL time.Duration) (*upload.Service, *clockPresigner, *testenv.Clock) {
		clock := testenv.NewClock(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
		store := memorystore.New(func(o *idempotency.Options) { o.TTL, o.Now = time.Hour, clock.Now })
		presigner := &clockPresigner{clock: clock}
		return upload.New(store, presigner, nil, upload.Config{Bucket: "b", Prefix: "uploads/", PresignTTL: presignTTL, MaxUploadBytes: 1 << 20}),
			presigner, clock
	}

	svc, presigner, _ := service(2 * time.Hour)
	if _, err := svc.Create(ctx, "tenant", "key-store-clock-01", req); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{time.Hour}; fmt.Sprint(presigner.lifetime) != fmt.Sprint(want) {
		t.Errorf("PRESIGN_TTL 2h, a store keeping claims 1h: URL lifetimes %v, want %v", presigner.lifetime, want)
	}

	svc, _, clock := service(10 * time.Minute)
	url := func() string {
		t.Helper()
		res, err := svc.Create(ctx, "tenant", "key-store-clock-02", req)
		if err != nil {
			t.Fatal(err)
		}
		var u api.Upload
		if err := json.Unmarshal(res.Body, &u); err != nil || u.Upload == nil {
			t.Fatalf("create answered %s, %v", res.Body, err)
		}
		return u.Upload.URL
	}
	first := url()
	clock.Advance(5 * time.Minute)
	if got := url(); got != first {
		t.Errorf("a replay within the URL's 10 minutes answered %s, want the recorded %s", got, first)
	}
	clock.Advance(6 * time.Minute)
	if got := url(); got == first {
		t.Errorf("a replay 11 minutes after a 10-minute URL, by the store's clock, answered the expired URL %s", got)
	}
}
