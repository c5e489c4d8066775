package golden_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// TestFormerItemsBehave puts the items of testdata/former_items.json, as
// the stores wrote them before the records were cut to what they must hold
// (issue 32: each value once, the pending single PUT's body rebuilt from
// its fields), and as they wrote them before pkg/idempotency/recordstore existed,
// straight into a table, and holds the code of now to them, since deployed
// tables hold them: each decodes, a recorded body is answered verbatim,
// and each record left between two steps goes on as it did, to the very
// item the next step wrote then (or, where the code of now writes a value
// in a new form, to the item it writes now, which the file names).
func TestFormerItemsBehave(t *testing.T) {
	ctx := context.Background()
	shapes := readShapes(t, "former_items.json")
	client := testenv.DynamoClient(dynoxide.Endpoint(t), nil)
	schema := idempotency.DefaultSchema()
	for name, item := range shapes {
		rec, err := recordstore.DecodeItem(schema, item)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var f struct {
			Size int64 `dynamodbav:"size"`
		}
		if err := rec.Data.Decode(&f); err != nil || string(rec.State) != item["state"].(*types.AttributeValueMemberS).Value {
			t.Errorf("%s: decoded %s with fields %+v, %v", name, rec.State, f, err)
		}
		if data, ok := item["data"].(*types.AttributeValueMemberM); ok {
			if n, ok := data.Value["size"].(*types.AttributeValueMemberN); ok && strconv.FormatInt(f.Size, 10) != n.Value {
				t.Errorf("%s: size decoded as %d, the item holds %s", name, f.Size, n.Value)
			}
		}
		if rec.State == idempotency.StateCompleted && rec.Tenant == "tenant-golden" {
			if _, ok, err := uploadrecord.EventOf("uploads-golden", nil, &rec); !ok || err != nil {
				t.Errorf("%s: no event (%v)", name, err)
			}
		}
	}

	single := api.CreateRequest{Filename: "report.pdf", ContentType: "application/pdf", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	const partSize = 5 << 20
	multipart := api.CreateRequest{Filename: "video.mp4", ContentType: "video/mp4", Size: 2*partSize + 1<<20, PartSize: partSize}
	// verbatim checks that an answer is the body the item records.
	verbatim := func(t *testing.T, what string, res upload.Result, err error, item map[string]types.AttributeValue) {
		t.Helper()
		if want := item["response_body"].(*types.AttributeValueMemberS).Value; err != nil || string(res.Body) != want {
			t.Errorf("%s = %s, %v\nwant the recorded body %s", what, res.Body, err, want)
		}
	}
	// Each step starts from the item as it was, at the time it ran then.
	steps := []struct {
		from, to string
		at       time.Duration // after base
		run      func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string)
	}{
		{"single PUT, pending", "single PUT, pending", time.Minute, func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string) {
			res, err := svc.Create(ctx, "tenant-golden", "key-single-put", single)
			verbatim(t, "the replay", res, err, shapes["single PUT, pending"])
			if res.Effect != upload.EffectReplayed {
				t.Errorf("the replay's effect = %q, want %q", res.Effect, upload.EffectReplayed)
			}
			res, err = svc.Status(ctx, "tenant-golden", uploadID)
			verbatim(t, "the status", res, err, shapes["single PUT, pending"])
		}},
		{"single PUT, pending", "single PUT, completed", time.Minute, func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string) {
			objects.Put("uploads/"+uploadID, singleObject(objects.Now()))
			if got, err := svc.Finalize(ctx, upload.ObjectCreated{Bucket: "uploads-golden", Key: "uploads/" + uploadID, Time: objects.Now()}); err != nil || got != upload.OutcomeCompleted {
				t.Fatalf("finalize = %q, %v", got, err)
			}
		}},
		{"single PUT, pending", "single PUT, completed", time.Minute, func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string) {
			// No event came: the status finds the object and heals.
			objects.Put("uploads/"+uploadID, singleObject(objects.Now()))
			if res, err := svc.Status(ctx, "tenant-golden", uploadID); err != nil || res.Effect != upload.EffectHealed {
				t.Fatalf("status = %q, %v; want it healed", res.Effect, err)
			}
		}},
		{"multipart, pending in the tenant's group", "multipart, pending in the tenant's group", 2 * time.Minute, func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string) {
			res, err := svc.Create(ctx, "tenant-golden", "key-multipart-complete", multipart)
			verbatim(t, "the replay", res, err, shapes["multipart, pending in the tenant's group"])
		}},
		{"multipart, pending in the tenant's group", "multipart, completed from a former pending record", 2 * time.Minute, func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string) {
			createdAtS3(t, objects, "uploads/"+uploadID)
			putParts(t, objects, "uploads/"+uploadID)
			if _, err := svc.Complete(ctx, "tenant-golden", uploadID, api.CompleteRequest{SHA256: fileSum}); err != nil {
				t.Fatal(err)
			}
		}},
		{"multipart, aborting", "multipart, aborted", 33 * time.Minute, func(t *testing.T, svc *upload.Service, objects *s3fake.Client, uploadID string) {
			createdAtS3(t, objects, "uploads/"+uploadID)
			if _, err := svc.Abort(ctx, "tenant-golden", uploadID); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, step := range steps {
		t.Run(step.from+" to "+step.to, func(t *testing.T) {
			table := testenv.NewTable(t, client)
			item := shapes[step.from]
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
				t.Fatal(err)
			}
			clock := testenv.NewClock(base.Add(step.at))
			store := dynamostore.New(client, table, func(o *idempotency.Options) { o.TTL, o.Now = ttl, clock.Now })
			objects := newBucket(clock)
			svc := upload.New(store, presigner{clock}, objects, goldenConfig, func(o *upload.Options) {
				// Not the golden run's source: a replay draws another
				// upload id than the item's, as it would at any later time.
				o.Random, o.Logger = rand.NewChaCha8([32]byte{1}), quiet
			})
			step.run(t, svc, objects, item["claim_id"].(*types.AttributeValueMemberS).Value)
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": item["pk"]}, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := itemText(itemJSON(out.Item)), itemText(itemJSON(shapes[step.to])); got != want {
				t.Errorf("the item became\n %s\nwant %s (%q)", got, want, step.to)
			}
		})
	}

	t.Run("MakeIdempotent", func(t *testing.T) {
		table := testenv.NewTable(t, client)
		for _, name := range []string{"MakeIdempotent, completed", "MakeIdempotent, in progress (to fail)"} {
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: shapes[name]}); err != nil {
				t.Fatal(err)
			}
		}
		// The time the completed record was written, and the lease of the
		// one in progress still runs.
		at := time.UnixMilli(mustInt(t, shapes["MakeIdempotent, completed"]["updated_at"]))
		clock := testenv.NewClock(at)
		store := dynamostore.New(client, table, func(o *idempotency.Options) { o.TTL, o.Now = ttl, clock.Now })
		runs := 0
		charge := idempotency.MakeIdempotent(store, func(context.Context, map[string]string) (map[string]string, error) {
			runs++
			return map[string]string{"charge": "ch_2"}, nil
		}, func(o *idempotency.HandlerOptions[map[string]string, map[string]string]) {
			o.KeyPath, o.Scope, o.Now, o.Logger = "key", "payments", clock.Now, quiet
		})
		got, err := charge(ctx, map[string]string{"key": "order-1", "amount": "1000"})
		if err != nil || got["charge"] != "ch_1" || runs != 0 {
			t.Fatalf("retry of order-1 = %v, %v after %d runs; want the recorded ch_1 and no run", got, err, runs)
		}
		if _, err := charge(ctx, map[string]string{"key": "order-2", "fail": "yes"}); !errors.Is(err, idempotency.ErrInProgress) || runs != 0 {
			t.Fatalf("order-2 while its claim's lease runs: %v after %d runs, want ErrInProgress", err, runs)
		}
	})
}

// createdAtS3 is the S3 multipart upload at key of an item written before
// this run, as its create made it: newBucket names it as the item does.
func createdAtS3(t *testing.T, b *s3fake.Client, key string) {
	t.Helper()
	if _, err := b.CreateMultipartUpload(context.Background(), &s3.CreateMultipartUploadInput{Key: &key, ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256}); err != nil {
		t.Fatal(err)
	}
}

// readShapes reads a file of testdata, the last item of each name.
func readShapes(t *testing.T, file string) map[string]map[string]types.AttributeValue {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var raw []struct {
		Name string                     `json:"name"`
		Item map[string]json.RawMessage `json:"item"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	shapes := map[string]map[string]types.AttributeValue{}
	for _, s := range raw {
		item := map[string]types.AttributeValue{}
		for k, v := range s.Item {
			if item[k], err = valueOf(v); err != nil {
				t.Fatalf("%s: %s: %v", s.Name, k, err)
			}
		}
		shapes[s.Name] = item
	}
	return shapes
}

// valueOf reads a value in DynamoDB's JSON, as valueJSON writes it.
func valueOf(raw json.RawMessage) (types.AttributeValue, error) {
	var v struct {
		S    *string
		N    *string
		B    []byte // base64 in JSON, as valueJSON writes it
		BOOL *bool
		NULL *bool
		M    map[string]json.RawMessage
		L    []json.RawMessage
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch {
	case v.S != nil:
		return &types.AttributeValueMemberS{Value: *v.S}, nil
	case v.B != nil:
		return &types.AttributeValueMemberB{Value: v.B}, nil
	case v.N != nil:
		return &types.AttributeValueMemberN{Value: *v.N}, nil
	case v.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *v.BOOL}, nil
	case v.NULL != nil:
		return &types.AttributeValueMemberNULL{Value: *v.NULL}, nil
	case v.M != nil:
		m := map[string]types.AttributeValue{}
		for k, e := range v.M {
			av, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case v.L != nil:
		l := make([]types.AttributeValue, len(v.L))
		for i, e := range v.L {
			av, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	}
	return nil, fmt.Errorf("no type this test reads in %s", raw)
}

func mustInt(t *testing.T, av types.AttributeValue) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(av.(*types.AttributeValueMemberN).Value, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
