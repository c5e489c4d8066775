package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// With a cap of one unfinished upload in parts per tenant, a second create
// in parts is refused with 429 too_many_uploads after one attempt (a retry
// cannot help); the first one's key still replays, and once it is aborted
// the second is created. Uploads in one PUT are not counted.
func TestTooManyUploadsAgainstTheLocalStack(t *testing.T) {
	st := startStack(t, map[string]string{"MAX_PENDING_MULTIPART_PER_TENANT": "1"})
	ctx := context.Background()
	c, err := client.New(st.APIURL, fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("any"))
	inParts := api.CreateRequest{Filename: "big.bin", ContentType: "application/octet-stream", Size: 11 << 20, SHA256: hex.EncodeToString(sum[:]), PartSize: api.MinPartSize}
	firstKey := client.NewKey()
	first, err := c.Create(ctx, firstKey, inParts)
	if err != nil {
		t.Fatal(err)
	}
	secondKey := client.NewKey()
	_, err = c.Create(ctx, secondKey, inParts)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests || e.Code != client.CodeTooManyUploads || e.Attempts != 1 || e.Exhausted {
		t.Fatalf("second upload in parts: %v; want 429 %s after one attempt", err, client.CodeTooManyUploads)
	}
	if again, err := c.Create(ctx, firstKey, inParts); err != nil || !again.Replayed || again.Upload.UploadID != first.Upload.UploadID {
		t.Fatalf("the first key again: %+v, %v; want its upload replayed", again, err)
	}
	// One PUT is not capped.
	if _, err := c.Upload(ctx, writeFile(t, "small.bin", 1000), client.UploadInput{}); err != nil {
		t.Fatalf("an upload in one PUT: %v", err)
	}
	if _, err := c.Abort(ctx, first.Upload.UploadID); err != nil {
		t.Fatal(err)
	}
	second, err := c.Create(ctx, secondKey, inParts)
	if err != nil || second.Upload.Status != api.StatusPending || second.Replayed {
		t.Fatalf("the second upload after the first was aborted: %+v, %v", second, err)
	}
}
