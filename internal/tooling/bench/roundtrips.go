// Package bench measures the system for `make bench`: round trips per
// request, load through the local front door, cold start and binary size.
// Numbers are printed, never asserted as timings; only the round-trip
// budget is held by a test, because a count is exact.
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/internal/wiring"
	"github.com/onceupload/onceupload/pkg/api"
)

// RoundTrips are the DynamoDB calls one request of each kind sends, and the
// S3 calls where there are any. The design's budget is exactly one DynamoDB
// call each; no S3 call for a create, a replay or a status, and exactly
// one HeadObject for a finalize record (S3 confirms the object before it
// is recorded); a status of a pending upload whose event was lost adds one
// HeadObject (and one UpdateItem to complete it).
type RoundTrips struct {
	// DynamoDB calls of each path.
	Create, ReplayPending, ReplayCompleted, Status, Finalize int
	// FinalizeS3 is the S3 calls of a finalize record: its HeadObject.
	FinalizeS3 int
	// StatusHeal is the calls (DynamoDB and S3) of a status that finds the
	// object in S3 and completes it.
	StatusHeal int
	// ByPath has the calls (DynamoDB and S3) by operation for each path.
	ByPath map[string]map[string]int
}

// Line renders the report line scripts read: DynamoDB calls per path.
func (r RoundTrips) Line() string {
	return fmt.Sprintf("round-trips: create=%d replay-pending=%d replay-completed=%d status=%d finalize=%d",
		r.Create, r.ReplayPending, r.ReplayCompleted, r.Status, r.Finalize)
}

// MeasureRoundTrips runs each path once against an existing table and
// bucket on the DynamoDB and S3 servers at the endpoints, with the service
// the functions build (wiring.Service) and every attempt counted.
func MeasureRoundTrips(ctx context.Context, dynamoURL, table, s3URL, bucket string) (RoundTrips, error) {
	// calls counts every call by operation; s3Calls the S3 client's only.
	var calls, s3Calls callcount.Counter
	env := map[string]string{"TABLE_NAME": table, "BUCKET_NAME": bucket, "S3_FORCE_PATH_STYLE": "true"}
	local := services.AWSConfig()
	svc, _, err := wiring.Presign(ctx, func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		slog.New(slog.NewTextHandler(io.Discard, nil)),
		wiring.Local(dynamoURL, s3URL, local.Credentials, local.Region, calls.Middleware),
		func(o *wiring.Options) {
			o.S3 = append(o.S3, func(o *s3.Options) { o.APIOptions = append(o.APIOptions, s3Calls.Middleware) })
		})
	if err != nil {
		return RoundTrips{}, err
	}
	reset := func() { calls.Reset(); s3Calls.Reset() }

	rt := RoundTrips{ByPath: map[string]map[string]int{}}
	// measure runs fn and adds its DynamoDB calls to dst, its S3 calls to
	// s3dst if not nil.
	measure := func(path string, dst, s3dst *int, fn func() error) error {
		reset()
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rt.ByPath[path] = calls.Ops()
		s3n := s3Calls.Total()
		*dst += calls.Total() - s3n
		if s3dst != nil {
			*s3dst += s3n
		}
		return nil
	}
	content := []byte("round trips")
	sum := sha256.Sum256(content)
	req := api.CreateRequest{Filename: "rt.txt", ContentType: "text/plain", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	var created api.Upload
	steps := []struct {
		path       string
		dst, s3dst *int
		fn         func() error
	}{
		{"create", &rt.Create, nil, func() error {
			r, err := svc.Create(ctx, "bench", "round-trip-key-0001", req)
			if err == nil {
				err = json.Unmarshal(r.Body, &created)
			}
			return err
		}},
		{"replay-pending", &rt.ReplayPending, nil, func() error {
			_, err := svc.Create(ctx, "bench", "round-trip-key-0001", req)
			return err
		}},
		{"finalize", &rt.Finalize, &rt.FinalizeS3, func() error {
			if err := put(ctx, created, content); err != nil {
				return err
			}
			reset() // the PUT is the client's, not the service's
			out, err := svc.Finalize(ctx, upload.ObjectCreated{Bucket: bucket, Key: created.StorageKey, Size: int64(len(content)), ETag: "e", Time: time.Now()})
			if err == nil && out != upload.OutcomeCompleted {
				err = fmt.Errorf("outcome %s", out)
			}
			return err
		}},
		{"replay-completed", &rt.ReplayCompleted, nil, func() error {
			_, err := svc.Create(ctx, "bench", "round-trip-key-0001", req)
			return err
		}},
		{"status", &rt.Status, nil, func() error {
			_, err := svc.Status(ctx, "bench", created.UploadID)
			return err
		}},
		{"status-heal", &rt.StatusHeal, &rt.StatusHeal, func() error { // both: all its calls
			r, err := svc.Create(ctx, "bench", "round-trip-key-0002", req)
			var u api.Upload
			if err == nil {
				err = json.Unmarshal(r.Body, &u)
			}
			if err == nil {
				err = put(ctx, u, content)
			}
			reset()
			if err == nil {
				_, err = svc.Status(ctx, "bench", u.UploadID)
			}
			return err
		}},
	}
	for _, s := range steps {
		if err := measure(s.path, s.dst, s.s3dst, s.fn); err != nil {
			return rt, err
		}
	}
	return rt, nil
}

// put sends content to an upload's presigned URL.
func put(ctx context.Context, u api.Upload, content []byte) error {
	if u.Upload == nil {
		return fmt.Errorf("upload %s has no PUT instructions (status %s)", u.UploadID, u.Status)
	}
	code, err := services.PutSigned(ctx, *u.Upload, content, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("PUT: status %d", code)
	}
	return err
}
