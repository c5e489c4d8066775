package golden_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
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

var dynoxide = testenv.SharedDynoxide()

func TestMain(m *testing.M) { testenv.Main(m, dynoxide) }

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// base is where the clock starts: fixed, so that every time an item holds
// is the same on every run, and years ahead, so that no expiry sweep of
// the server takes an item while the test reads it.
var base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const ttl = time.Hour

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// goldenConfig is the service's configuration in the golden run.
var goldenConfig = upload.Config{
	Bucket: "uploads-golden", Prefix: "uploads/", PresignTTL: 15 * time.Minute,
	MaxUploadBytes: 1 << 30, MaxPendingMultipart: 10,
}

var (
	// content is the golden single PUT's file, and sum its SHA-256.
	content = []byte("the golden file's bytes")
	sum     = sha256.Sum256(content)
	// fileSum is the whole file's sha256 a multipart upload declares.
	fileSum = strings.Repeat("ab", 32)
)

// singleObject is the golden single PUT's object, as S3 would hold it
// after the client's PUT at now.
func singleObject(now time.Time) s3.HeadObjectOutput {
	return s3.HeadObjectOutput{
		ContentLength: aws.Int64(int64(len(content))), ETag: aws.String(`"etag-single"`), LastModified: aws.Time(now),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
}

// TestGoldenItems drives the upload service and MakeIdempotent through
// every shape of record they write, on a real local DynamoDB, and holds
// each item (every attribute, with its DynamoDB type) and every request
// the stores send (expressions with their names and values) to the files
// under testdata: the tables deployed today hold these items, so a change
// to either file is a change to them. Only the claim ids MakeIdempotent
// draws at random are normalised; the clock and the upload ids' random
// source are fixed, and the fake presigner signs nothing.
//
// go test ./internal/checks/golden -update rewrites the files, for a change of
// the stored form that is meant (and then needs a migration note).
func TestGoldenItems(t *testing.T) {
	ctx := context.Background()
	endpoint := dynoxide.Endpoint(t)
	direct := testenv.DynamoClient(endpoint, nil)
	table := testenv.NewTable(t, direct)
	rec := &recorder{next: testenv.DynamoClient(endpoint, nil)}
	clock := testenv.NewClock(base)
	objects := newBucket(clock)
	g := &golden{t: t, client: direct, table: table, rec: rec}

	store := dynamostore.New(rec, table, func(o *idempotency.Options) { o.TTL, o.Now = ttl, clock.Now })
	cfg := goldenConfig
	svc := upload.New(store, presigner{clock}, objects, cfg, func(o *upload.Options) {
		o.Random, o.Logger = rand.NewChaCha8([32]byte{}), quiet
	})
	// again answers the replays the bodies are checked with: a replay
	// draws an upload id before its claim meets the record, and drawn from
	// svc's source it would change every later upload id of the run.
	again := upload.New(store, presigner{clock}, objects, cfg, func(o *upload.Options) {
		o.Random, o.Logger = rand.NewChaCha8([32]byte{1}), quiet
	})
	const tenant = "tenant-golden"
	single := api.CreateRequest{Filename: "report.pdf", ContentType: "application/pdf", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
	const partSize = 5 << 20
	multipart := api.CreateRequest{Filename: "video.mp4", ContentType: "video/mp4", Size: 2*partSize + 1<<20, PartSize: partSize}

	create := func(key string, req api.CreateRequest) string {
		t.Helper()
		res, err := svc.Create(ctx, tenant, key, req)
		if err != nil {
			t.Fatalf("create %s: %v", key, err)
		}
		return res.UploadID
	}
	// stored puts the object of a single PUT in the bucket, as S3 would
	// after the client's PUT.
	stored := func(uploadID string) { objects.Put(cfg.Prefix+uploadID, singleObject(clock.Now())) }
	finalize := func(uploadID string, want upload.Outcome) {
		t.Helper()
		got, err := svc.Finalize(ctx, upload.ObjectCreated{Bucket: cfg.Bucket, Key: cfg.Prefix + uploadID, Time: clock.Now()})
		if err != nil || got != want {
			t.Fatalf("finalize %s = %q, %v; want %q", uploadID, got, err, want)
		}
	}

	// Every answer's body goes to testdata/bodies.txt; the ones a record
	// answers again (a replay, a status) must be, byte for byte, the first
	// it gave: rebuilt from the record's fields or recorded, a client sees
	// one body.
	var bodies strings.Builder
	answer := func(what string, res upload.Result, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		fmt.Fprintf(&bodies, "## %s\n%s\n", what, res.Body)
		return res.Body
	}
	same := func(what string, res upload.Result, err error, first []byte) {
		t.Helper()
		if got := answer(what, res, err); !bytes.Equal(got, first) {
			t.Errorf("%s =\n %s\nwant the first answer, byte for byte:\n %s", what, got, first)
		}
	}

	g.step("create a single PUT")
	res, err := svc.Create(ctx, tenant, "key-single-put", single)
	put := res.UploadID
	first := answer("create a single PUT", res, err)
	g.snapshot("single PUT, pending", put)
	g.step("replay its create")
	res, err = svc.Create(ctx, tenant, "key-single-put", single)
	same("replay its create", res, err, first)
	g.step("status of the pending single PUT")
	res, err = svc.Status(ctx, tenant, put)
	same("status of the pending single PUT", res, err, first)
	g.step("finalize the single PUT")
	clock.Advance(time.Minute)
	stored(put)
	finalize(put, upload.OutcomeCompleted)
	g.snapshot("single PUT, completed", put)
	// The event reads the object key the record derives, as every reader.
	if ev, ok, err := uploadrecord.EventOf(cfg.Bucket, nil, g.record(put)); !ok || err != nil || ev.Detail.StorageKey != cfg.Prefix+put {
		t.Errorf("the completed record's event = %+v, %v, %v; want storageKey %s", ev.Detail, ok, err, cfg.Prefix+put)
	}
	g.step("status of the completed single PUT")
	res, err = svc.Status(ctx, tenant, put)
	completed := answer("status of the completed single PUT", res, err)
	g.step("replay its create once completed")
	res, err = again.Create(ctx, tenant, "key-single-put", single)
	same("replay its create once completed", res, err, completed)
	g.step("finalize it again: a duplicate event")
	finalize(put, upload.OutcomeDuplicate)

	g.step("create a multipart upload without the file's sha256")
	objects.Hooks.CreateMultipartUpload = func(ctx context.Context, in *s3.CreateMultipartUploadInput, next s3fake.Next[s3.CreateMultipartUploadInput, s3.CreateMultipartUploadOutput]) (*s3.CreateMultipartUploadOutput, error) {
		g.snapshot("multipart create, in progress with its lease", strings.TrimPrefix(aws.ToString(in.Key), cfg.Prefix))
		return next(ctx, in)
	}
	res, err = svc.Create(ctx, tenant, "key-multipart-complete", multipart)
	mp := res.UploadID
	first = answer("create a multipart upload without the file's sha256", res, err)
	objects.Hooks.CreateMultipartUpload = nil
	putParts(t, objects, cfg.Prefix+mp)
	g.snapshot("multipart, pending in the tenant's group", mp)
	g.step("replay the multipart create")
	res, err = again.Create(ctx, tenant, "key-multipart-complete", multipart)
	same("replay the multipart create", res, err, first)
	g.step("complete it, declaring the file's sha256")
	clock.Advance(time.Minute)
	res, err = svc.Complete(ctx, tenant, mp, api.CompleteRequest{SHA256: fileSum})
	completed = answer("complete it, declaring the file's sha256", res, err)
	g.snapshot("multipart, completed", mp)
	g.step("status of the completed multipart upload")
	res, err = svc.Status(ctx, tenant, mp)
	same("status of the completed multipart upload", res, err, completed)
	g.step("replay the multipart create once completed")
	res, err = again.Create(ctx, tenant, "key-multipart-complete", multipart)
	same("replay the multipart create once completed", res, err, completed)

	g.step("create a multipart upload with the file's sha256")
	withSum := multipart
	withSum.SHA256 = fileSum
	ab := create("key-multipart-abort", withSum)
	g.step("sign a part past half its retention: the record is renewed")
	clock.Advance(ttl/2 + time.Minute)
	if _, err := svc.SignParts(ctx, tenant, ab, api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: 1, SHA256: fileSum}}}); err != nil {
		t.Fatal(err)
	}
	g.snapshot("multipart, pending, renewed", ab)
	g.step("abort it")
	objects.Hooks.AbortMultipartUpload = func(ctx context.Context, in *s3.AbortMultipartUploadInput, next s3fake.Next[s3.AbortMultipartUploadInput, s3.AbortMultipartUploadOutput]) (*s3.AbortMultipartUploadOutput, error) {
		g.snapshot("multipart, aborting", strings.TrimPrefix(aws.ToString(in.Key), cfg.Prefix))
		return next(ctx, in)
	}
	res, err = svc.Abort(ctx, tenant, ab)
	aborted := answer("abort it", res, err)
	objects.Hooks.AbortMultipartUpload = nil
	g.snapshot("multipart, aborted", ab)
	g.step("status of the aborted upload")
	res, err = svc.Status(ctx, tenant, ab)
	same("status of the aborted upload", res, err, aborted)
	g.step("replay its create once aborted")
	res, err = again.Create(ctx, tenant, "key-multipart-abort", withSum)
	same("replay its create once aborted", res, err, aborted)

	g.step("a multipart create that S3 refuses: the claim is released")
	objects.Hooks.CreateMultipartUpload = func(context.Context, *s3.CreateMultipartUploadInput, s3fake.Next[s3.CreateMultipartUploadInput, s3.CreateMultipartUploadOutput]) (*s3.CreateMultipartUploadOutput, error) {
		return nil, s3fake.APIError("CreateMultipartUpload", http.StatusNotFound, &s3types.NoSuchBucket{})
	}
	if _, err := svc.Create(ctx, tenant, "key-multipart-refused", multipart); err == nil {
		t.Fatal("a create S3 refused succeeded")
	}
	objects.Hooks.CreateMultipartUpload = nil

	g.step("a single PUT whose event comes after its record expired")
	late := create("key-single-put-late", single)
	stored(late)
	clock.Advance(ttl + time.Minute)
	finalize(late, upload.OutcomeCompleted)
	g.snapshot("single PUT, completed late (revived)", late)
	g.step("status of the upload completed late")
	res, err = svc.Status(ctx, tenant, late)
	completed = answer("status of the upload completed late", res, err)
	g.step("replay its create once completed late")
	res, err = again.Create(ctx, tenant, "key-single-put-late", single)
	same("replay its create once completed late", res, err, completed)

	g.step("MakeIdempotent: a request runs and is recorded")
	istore := dynamostore.New(rec, table, func(o *idempotency.Options) { o.TTL, o.Now = ttl, clock.Now })
	charge := idempotency.MakeIdempotent(istore, func(_ context.Context, req map[string]string) (map[string]string, error) {
		id := string(idempotency.NewID("payments", req["key"]))
		if req["fail"] != "" {
			g.snapshot("MakeIdempotent, in progress (to fail)", id)
			return nil, errors.New("declined")
		}
		g.snapshot("MakeIdempotent, in progress", id)
		return map[string]string{"charge": "ch_1"}, nil
	}, func(o *idempotency.HandlerOptions[map[string]string, map[string]string]) {
		o.KeyPath, o.Scope, o.Now, o.Logger = "key", "payments", clock.Now, quiet
	})
	dctx, cancel := context.WithDeadline(ctx, clock.Now().Add(20*time.Second))
	defer cancel()
	if _, err := charge(dctx, map[string]string{"key": "order-1", "amount": "1000"}); err != nil {
		t.Fatal(err)
	}
	g.snapshot("MakeIdempotent, completed", string(idempotency.NewID("payments", "order-1")))
	g.step("MakeIdempotent: its retry is a replay")
	if _, err := charge(dctx, map[string]string{"key": "order-1", "amount": "1000"}); err != nil {
		t.Fatal(err)
	}
	g.step("MakeIdempotent: a failing request releases its claim")
	if _, err := charge(dctx, map[string]string{"key": "order-2", "fail": "yes"}); err == nil {
		t.Fatal("the failing request succeeded")
	}
	g.released(string(idempotency.NewID("payments", "order-2")))

	compare(t, "bodies.txt", []byte(bodies.String()))
	g.check()
}

// golden collects the items and requests the test holds to testdata.
type golden struct {
	t      *testing.T
	client *dynamodb.Client
	table  string
	rec    *recorder
	shapes []shape
	// gone are the items released since their last snapshot.
	gone []string
	// claims are the claim ids drawn at random (MakeIdempotent's), each
	// written as a placeholder.
	claims []string
}

// shape is one item as the table held it at a named moment.
type shape struct {
	Name string         `json:"name"`
	Item map[string]any `json:"item"`
}

func (g *golden) step(name string) { g.rec.note("## " + name) }

// snapshot reads the item of id as the table holds it now. id is a
// record's, or an upload id, which starts with its record's.
func (g *golden) snapshot(name, id string) {
	g.t.Helper()
	id = id[:idempotency.IDLen]
	out, err := g.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &g.table, ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
	})
	if err != nil || out.Item == nil {
		g.t.Fatalf("snapshot %q: item %s: %v (item %v)", name, id, err, out)
	}
	if strings.HasPrefix(name, "MakeIdempotent") {
		if c, ok := out.Item["claim_id"].(*types.AttributeValueMemberS); ok && !slices.Contains(g.claims, c.Value) {
			g.claims = append(g.claims, c.Value)
		}
	}
	g.shapes = append(g.shapes, shape{Name: name, Item: itemJSON(out.Item)})
}

// record decodes the item of id (or of an upload id) as the table holds
// it now, as the table's stream would carry it.
func (g *golden) record(id string) *recordstore.Record {
	g.t.Helper()
	out, err := g.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &g.table, ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id[:idempotency.IDLen]}},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	rec, err := recordstore.DecodeItem(idempotency.DefaultSchema(), out.Item)
	if err != nil {
		g.t.Fatal(err)
	}
	return &rec
}

// released notes that the item of id was deleted: the table must not
// hold it at the end.
func (g *golden) released(id string) { g.gone = append(g.gone, id) }

// normalise writes the random claim ids as placeholders.
func (g *golden) normalise(b []byte) []byte {
	for i, c := range g.claims {
		b = bytes.ReplaceAll(b, []byte(c), fmt.Appendf(nil, "<random claim id %d>", i+1))
	}
	return b
}

// check compares what was seen with the golden files, and the whole table
// with the last snapshot of each of its items.
func (g *golden) check() {
	t := g.t
	t.Helper()
	items, err := json.MarshalIndent(g.shapes, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "items.json", g.normalise(append(items, '\n')))
	compare(t, "requests.txt", g.normalise([]byte(g.rec.text())))

	last := map[string]string{}
	for _, s := range g.shapes {
		last[s.Item["pk"].(map[string]any)["S"].(string)] = itemText(s.Item)
	}
	for _, id := range g.gone {
		delete(last, id)
	}
	out, err := g.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &g.table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, item := range out.Items {
		pk := item["pk"].(*types.AttributeValueMemberS).Value
		if got, want := itemText(itemJSON(item)), last[pk]; got != want {
			t.Errorf("the table's item %s\n is %s\nwant %s (its last snapshot)", pk, got, want)
		}
		seen++
	}
	if seen != len(last) {
		t.Errorf("the table holds %d items, the snapshots %d", seen, len(last))
	}
}

// compare holds got to testdata/name, or rewrites it under -update.
func compare(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gotPath := filepath.Join(t.TempDir(), name)
		_ = os.WriteFile(gotPath, got, 0o644)
		t.Errorf("%s differs from what the stores wrote (written to %s; diff them): the stored form changed", path, gotPath)
	}
}

// itemText is an item's JSON, to compare items by.
func itemText(item map[string]any) string {
	b, _ := json.Marshal(item) // of strings, numbers, bools and bytes only
	return string(b)
}

// itemJSON is an item in DynamoDB's JSON: each value an object of one
// member naming its type.
func itemJSON(item map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = valueJSON(v)
	}
	return out
}

func valueJSON(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": itemJSON(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = valueJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	default:
		return map[string]any{"?": fmt.Sprintf("%T", v)}
	}
}

// recorder is the stores' DynamoDB client, writing down every request
// they send: its key and the expressions with their names and values.
type recorder struct {
	next *dynamodb.Client
	mu   sync.Mutex
	log  strings.Builder
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log.String()
}

func (r *recorder) note(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.log, "\n%s\n", line)
}

// request writes one request down: its operation, then each part it has,
// one a line, names and values sorted by placeholder.
func (r *recorder) request(op string, parts [][2]string, names map[string]string, values map[string]types.AttributeValue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.log, "%s\n", op)
	for _, p := range parts {
		if p[1] != "" {
			// An update expression has a line per clause.
			fmt.Fprintf(&r.log, "  %s: %s\n", p[0], strings.ReplaceAll(strings.TrimSpace(p[1]), "\n", " | "))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		fmt.Fprintf(&r.log, "  %s = %s\n", k, names[k])
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		b, _ := json.Marshal(valueJSON(values[k]))
		fmt.Fprintf(&r.log, "  %s = %s\n", k, b)
	}
}

func keyText(key map[string]types.AttributeValue) string {
	b, _ := json.Marshal(itemJSON(key))
	return string(b)
}

func (r *recorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.request("PutItem", [][2]string{
		{"Key", keyText(map[string]types.AttributeValue{"pk": in.Item["pk"]})},
		{"ConditionExpression", aws.ToString(in.ConditionExpression)},
		{"ReturnValues", string(in.ReturnValues)},
		{"ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure)},
	}, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	return r.next.PutItem(ctx, in, optFns...)
}

func (r *recorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.request("GetItem", [][2]string{
		{"Key", keyText(in.Key)},
		{"ConsistentRead", fmt.Sprint(aws.ToBool(in.ConsistentRead))},
		{"ProjectionExpression", aws.ToString(in.ProjectionExpression)},
	}, in.ExpressionAttributeNames, nil)
	return r.next.GetItem(ctx, in, optFns...)
}

func (r *recorder) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.request("UpdateItem", [][2]string{
		{"Key", keyText(in.Key)},
		{"UpdateExpression", aws.ToString(in.UpdateExpression)},
		{"ConditionExpression", aws.ToString(in.ConditionExpression)},
		{"ReturnValues", string(in.ReturnValues)},
		{"ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure)},
	}, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	return r.next.UpdateItem(ctx, in, optFns...)
}

func (r *recorder) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.request("DeleteItem", [][2]string{
		{"Key", keyText(in.Key)},
		{"ConditionExpression", aws.ToString(in.ConditionExpression)},
		{"ReturnValues", string(in.ReturnValues)},
		{"ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure)},
	}, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	return r.next.DeleteItem(ctx, in, optFns...)
}

func (r *recorder) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.request("Query", [][2]string{
		{"IndexName", aws.ToString(in.IndexName)},
		{"KeyConditionExpression", aws.ToString(in.KeyConditionExpression)},
		{"FilterExpression", aws.ToString(in.FilterExpression)},
		{"Select", string(in.Select)},
		{"ConsistentRead", fmt.Sprint(aws.ToBool(in.ConsistentRead))},
	}, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	return r.next.Query(ctx, in, optFns...)
}

// presigner signs nothing: its URLs are fixed text of what they would
// sign, with the clock's date, so that the bodies the records hold are the
// same on every run.
type presigner struct{ clock *testenv.Clock }

func (p presigner) sign(in *upload.PresignInput) *v4.PresignedHTTPRequest {
	url := fmt.Sprintf("https://uploads-golden.s3.example/%s?X-Amz-Date=%s&X-Amz-Expires=%d&X-Amz-Signature=golden",
		in.Key, p.clock.Now().UTC().Format("20060102T150405Z"), int(in.Expires.Seconds()))
	if in.PartNumber > 0 {
		url += fmt.Sprintf("&partNumber=%d&uploadId=%s", in.PartNumber, in.UploadID)
	}
	header := http.Header{
		"Host": {"uploads-golden.s3.example"}, "Content-Length": {fmt.Sprint(in.ContentLength)},
		"X-Amz-Checksum-Sha256": {in.ChecksumSHA256}, "If-None-Match": {"*"},
	}
	if in.ContentType != "" {
		header.Set("Content-Type", in.ContentType)
	}
	return &v4.PresignedHTTPRequest{URL: url, Method: http.MethodPut, SignedHeader: header}
}

func (p presigner) PresignPutObject(_ context.Context, in *upload.PresignInput) (*v4.PresignedHTTPRequest, error) {
	return p.sign(in), nil
}

func (p presigner) PresignUploadPart(_ context.Context, in *upload.PresignInput) (*v4.PresignedHTTPRequest, error) {
	return p.sign(in), nil
}

// newBucket is S3 as the service sees it, with the golden run's names and
// answers: upload ids from their keys, the clock's time, and S3's answer
// to the one complete (the object it makes keeps the fake's own ETag and
// checksum), so that the items hold the same on every run.
func newBucket(clock *testenv.Clock) *s3fake.Client {
	b := &s3fake.Client{Now: clock.Now, UploadID: func(key string) string { return "s3-upload-" + key[len("uploads/"):][:8] }}
	b.Hooks.CompleteMultipartUpload = func(ctx context.Context, in *s3.CompleteMultipartUploadInput, next s3fake.Next[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]) (*s3.CompleteMultipartUploadOutput, error) {
		out, err := next(ctx, in)
		if err == nil {
			out.ETag, out.ChecksumSHA256 = aws.String(`"etag-multipart-3"`), aws.String("Y29tcG9zaXRlLXNoYTI1Ng==-3")
		}
		return out, err
	}
	return b
}

// putParts puts the golden multipart upload's parts in the upload at key,
// as the client's part PUTs would: 5, 5 and 1 MiB.
func putParts(t *testing.T, b *s3fake.Client, key string) {
	t.Helper()
	for i, size := range []int64{5 << 20, 5 << 20, 1 << 20} {
		sum := sha256.Sum256([]byte{byte(i)})
		if err := b.PutPart(key, s3types.Part{
			PartNumber: aws.Int32(int32(i + 1)), Size: aws.Int64(size), ETag: aws.String(fmt.Sprintf(`"etag-part-%d"`, i+1)),
			ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		}); err != nil {
			t.Fatal(err)
		}
	}
}
