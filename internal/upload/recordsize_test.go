package upload_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tableitem"
	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// lambdaPresigner presigns as the function does on AWS: a virtual-hosted
// URL of a bucket named as template.yaml names it, signed with a role's
// temporary credentials, whose session token every URL carries. Presigning
// sends nothing, so no endpoint is reached.
func lambdaPresigner(bucket string, token string) *upload.S3Presigner {
	client := s3.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("ASIAQ3EGSN4HXEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", token),
	})
	return upload.NewPresigner(client, bucket)
}

// TestPendingSinglePutRecordSize creates a single PUT through the service,
// presigned as on Lambda, and measures the record the real local DynamoDB
// holds by DynamoDB's item-size rules: that record is billed on every
// create, every replay (a refused conditional put costs by the larger of
// the stored item and the one sent), finalize and every heal, so it holds
// its size to two write units (2,048 bytes) with Lambda's session token in
// its URL. The tenant is a Cognito user's, as the presign function names
// it; the file name is an ordinary one. Completed, the record keeps to one
// write unit: a one-PUT upload's finalize is usually refused (the CLI's
// status heals the record before S3's event arrives), and a refused
// conditional update is billed by the stored item.
func TestPendingSinglePutRecordSize(t *testing.T) {
	const budget, completedBudget = 2048, 1024
	ctx := context.Background()
	const bucket = "onceupload-123456789012-us-east-1-0a1b2c3d4e5f"
	const tenant = "jwt:67:https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbCdEfGhI:8f14e45f-ceea-467f-a0e6-8c1b2d3e4f50"
	content := []byte("%PDF-1.7 the quarterly report's bytes")
	req := requestFor(content, "application/pdf")
	req.Filename = "quarterly-report-2030-q1.pdf"

	for _, tc := range []struct {
		name  string
		token string
	}{
		{"without a session token", ""},
		{"with Lambda's session token", services.LambdaSessionToken()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ddb := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
			table := testenv.NewTable(t, ddb)
			store := dynamostore.New(ddb, table, func(o *idempotency.Options) { o.TTL = 24 * time.Hour })
			cfg := upload.Config{Bucket: bucket, Prefix: "uploads/", PresignTTL: 15 * time.Minute, MaxUploadBytes: 1 << 20}
			objects := &s3fake.Client{}
			svc := upload.New(store, lambdaPresigner(bucket, tc.token), objects, cfg, func(o *upload.Options) {
				o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			})
			res, err := svc.Create(ctx, tenant, "key-record-size-0001", req)
			if err != nil {
				t.Fatal(err)
			}
			id, err := upload.ParseUploadID(res.UploadID)
			if err != nil {
				t.Fatal(err)
			}
			item := func() map[string]types.AttributeValue {
				t.Helper()
				out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{
					TableName: &table, ConsistentRead: aws.Bool(true),
					Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: string(id)}},
				})
				if err != nil || out.Item == nil {
					t.Fatalf("read the record: %v (item %v)", err, out)
				}
				return out.Item
			}
			size := tableitem.ItemSize(item())
			t.Logf("pending single PUT %s: %d bytes, %d write units per write; body %d bytes, of which the URL %d",
				tc.name, size, tableitem.WriteUnits(size), len(res.Body), len(decode(t, res.Body).Upload.URL))
			// The record holds no body: the replay and the status rebuild
			// it, URL and token included, to the bytes the create sent.
			again, err := svc.Create(ctx, tenant, "key-record-size-0001", req)
			if err != nil || again.Effect != upload.EffectReplayed || !bytes.Equal(again.Body, res.Body) {
				t.Errorf("replay = %s, %v, %v\nwant %s replayed", again.Body, again.Effect, err, res.Body)
			}
			status, err := svc.Status(ctx, tenant, res.UploadID)
			if err != nil || !bytes.Equal(status.Body, res.Body) {
				t.Errorf("status = %s, %v\nwant %s", status.Body, err, res.Body)
			}
			if size > budget {
				t.Errorf("the pending single PUT's record %s is %d bytes, over its budget of %d (two write units)", tc.name, size, budget)
			}

			// The object arrives; the client's status heals the record.
			sum := sha256.Sum256(content)
			objects.Put(decode(t, res.Body).StorageKey, s3.HeadObjectOutput{
				ContentLength: aws.Int64(int64(len(content))), ETag: aws.String(`"etag-record-size"`),
				ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
			})
			healed, err := svc.Status(ctx, tenant, res.UploadID)
			if err != nil || healed.Effect != upload.EffectHealed {
				t.Fatalf("status with the object in S3 = %s, %v, %v; want it healed", healed.Body, healed.Effect, err)
			}
			completed := tableitem.ItemSize(item())
			t.Logf("completed single PUT %s: %d bytes, %d write units per write; body %d bytes",
				tc.name, completed, tableitem.WriteUnits(completed), len(healed.Body))
			if completed > completedBudget {
				t.Errorf("the completed single PUT's record %s is %d bytes, over its budget of %d (one write unit)", tc.name, completed, completedBudget)
			}
		})
	}
}

// TestPendingBodyRecordedOrRebuilt creates single PUTs under prefixes the
// real presigner writes into a URL as they are and one it must escape:
// the record holds no body when the URL can be cut and rebuilt, the body
// itself when it cannot, and either way a replay answers the create's
// bytes.
func TestPendingBodyRecordedOrRebuilt(t *testing.T) {
	ctx := context.Background()
	const bucket = "onceupload-123456789012-us-east-1-0a1b2c3d4e5f"
	for _, tc := range []struct {
		name, prefix string
		recorded     bool
	}{
		{"the default prefix", "uploads/", false},
		{"no prefix", "", false},
		{"a prefix the URL escapes", "in/sub dir/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memorystore.New()
			cfg := upload.Config{Bucket: bucket, Prefix: tc.prefix, PresignTTL: 15 * time.Minute, MaxUploadBytes: 1 << 20}
			svc := upload.New(store, lambdaPresigner(bucket, services.LambdaSessionToken()), &s3fake.Client{}, cfg, func(o *upload.Options) {
				o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			})
			req := requestFor([]byte("the bytes"), "text/plain")
			res, err := svc.Create(ctx, "tenant", "key-recorded-or-rebuilt", req)
			if err != nil {
				t.Fatal(err)
			}
			if got := decode(t, res.Body).StorageKey; got != tc.prefix+res.UploadID {
				t.Errorf("storageKey = %q, want %q", got, tc.prefix+res.UploadID)
			}
			id, _ := upload.ParseUploadID(res.UploadID)
			rec, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if recorded := len(rec.Response.Body) > 0; recorded != tc.recorded || recorded && !bytes.Equal(rec.Response.Body, res.Body) {
				t.Errorf("the record holds the body %q; want it recorded: %v", rec.Response.Body, tc.recorded)
			}
			again, err := svc.Create(ctx, "tenant", "key-recorded-or-rebuilt", req)
			if err != nil || !bytes.Equal(again.Body, res.Body) {
				t.Errorf("replay = %s, %v\nwant %s", again.Body, err, res.Body)
			}
		})
	}
}
