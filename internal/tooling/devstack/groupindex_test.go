package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// The table template.yaml declares, the one every test table copies
// (testenv.NewTable) and the one pkg/idempotency/recordstore's default Schema reads and
// counts groups on are one shape.
func TestTemplateTableIsTheStoresTable(t *testing.T) {
	spec, err := LoadSpec(filepath.Join("..", "..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, tbl := idempotency.DefaultSchema(), spec.Table
	want := []IndexSpec{{Name: d.GroupIndex, PartitionKey: d.Group, SortKey: d.ExpiresAt, ProjectionType: "KEYS_ONLY"}}
	if !reflect.DeepEqual(tbl.Indexes, want) {
		t.Errorf("template indexes %+v, want %+v", tbl.Indexes, want)
	}
	if tbl.PartitionKey != d.PartitionKey || tbl.TTLAttribute != d.ExpiresAt || tbl.AttributeDefs[d.Group] != "S" || tbl.AttributeDefs[d.ExpiresAt] != "N" {
		t.Errorf("template table %+v, want key %s, TTL and index sort key %s (N), index key %s (S)", tbl, d.PartitionKey, d.ExpiresAt, d.Group)
	}
	if got := testenv.GroupIndex; got != (testenv.Index{Name: d.GroupIndex, PartitionKey: d.Group, SortKey: d.ExpiresAt}) {
		t.Errorf("testenv.GroupIndex = %+v, not the template's", got)
	}
}

// Through the front door, on the index the stack made from template.yaml:
// a tenant's multipart create past MAX_PENDING_MULTIPART_PER_TENANT is a
// 429 too_many_uploads without Retry-After; another tenant is not counted;
// an abort frees the place.
func TestMultipartCapThroughTheFrontDoor(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	env := map[string]string{"MAX_PENDING_MULTIPART_PER_TENANT": "1"}
	st, err := Start(context.Background(), Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(), Table: "idempotency-cap", Bucket: "uploads-cap",
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sum := sha256.Sum256(make([]byte, 6<<20))
	body := fmt.Appendf(nil, `{"filename":"big.bin","contentType":"application/octet-stream","size":%d,"sha256":"%x","partSize":%d}`, 6<<20, sum, 5<<20)
	owner, other := jwt(`{"sub":"owner"}`), jwt(`{"sub":"other"}`)

	first := do(t, "POST", st.APIURL+"/uploads", "cap-front-door-key-1", owner, body)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	refused := do(t, "POST", st.APIURL+"/uploads", "cap-front-door-key-2", owner, body)
	if refused.status != 429 || !bytes.Contains(refused.body, []byte(`"error":"`+api.CodeTooManyUploads+`"`)) || refused.header.Get("Retry-After") != "" {
		t.Fatalf("second: %d %v %s, want 429 too_many_uploads without Retry-After", refused.status, refused.header, refused.body)
	}
	if r := do(t, "POST", st.APIURL+"/uploads", "cap-front-door-key-2", other, body); r.status != 201 {
		t.Fatalf("another tenant: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", st.APIURL+"/uploads", "cap-front-door-key-1", owner, body); r.status != 201 || r.header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay at the cap: %d %v %s", r.status, r.header, r.body)
	}
	if r := do(t, "DELETE", st.APIURL+first.header.Get("Location"), "", owner, nil); r.status != 200 {
		t.Fatalf("abort: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", st.APIURL+"/uploads", "cap-front-door-key-2", owner, body); r.status != 201 {
		t.Fatalf("after the abort: %d %s", r.status, r.body)
	}
}

// A data directory whose table predates the index (kept across an
// upgrade) gets it at the next start, as a CloudFormation update adds it.
func TestStackAddsAMissingIndex(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	ctx, dir := context.Background(), t.TempDir()
	old, err := services.StartDynoxide(ctx, services.Options{DBPath: filepath.Join(dir, "dynamodb.sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	table, oldClient := "idempotency-old", testenv.DynamoClient(old.Endpoint, nil)
	_, err = oldClient.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
		BillingMode:          dbtypes.BillingModePayPerRequest,
	})
	if err == nil {
		_, err = oldClient.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]dbtypes.AttributeValue{"pk": &dbtypes.AttributeValueMemberS{Value: "kept"}}})
	}
	if stopErr := old.Stop(); err != nil || stopErr != nil {
		t.Fatalf("the old table: %v, %v", err, stopErr)
	}
	st, err := Start(ctx, Config{S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: dir, Table: table, Bucket: "uploads-old"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	client := testenv.DynamoClient(st.DynamoURL, nil)
	kept, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]dbtypes.AttributeValue{"pk": &dbtypes.AttributeValueMemberS{Value: "kept"}}})
	if err != nil || kept.Item == nil {
		t.Fatalf("the old table's item: %v, %v; the stack did not keep the old table", kept, err)
	}
	store := dynamostore.New(client, table)
	if n, err := store.CountGroup(ctx, "g", ""); err != nil || n != 0 {
		t.Fatalf("count on the upgraded table: %d, %v", n, err)
	}
}
