package services_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// toolsWith points TOOLS_DIR at a folder whose bin holds only the named
// installed tools.
func toolsWith(t *testing.T, tools ...string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		p, err := services.Binary(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, "bin", tool)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TOOLS_DIR", dir)
}

func TestStartDynamoDBPicksDynoxide(t *testing.T) {
	testenv.RequireTools(t, "dynoxide", "dynalite")
	toolsWith(t, "dynoxide", "dynalite")
	if name, err := services.DynamoDBServer(); name != "dynoxide" || err != nil {
		t.Fatalf("DynamoDBServer() = %q, %v; want dynoxide", name, err)
	}
	p, err := services.StartDynamoDB(context.Background(), services.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if p.Name != "dynoxide" {
		t.Errorf("started %s, want dynoxide", p.Name)
	}
	exercise(t, p.Endpoint, "local-table", true)
}

// Without dynoxide (no build for the platform), the local DynamoDB is
// dynalite: the table, its TTL setting and items work as on dynoxide, and
// the data outlives a restart.
func TestStartDynamoDBFallsBackToDynalite(t *testing.T) {
	testenv.RequireTools(t, "dynalite")
	toolsWith(t, "dynalite")
	if name, err := services.DynamoDBServer(); name != "dynalite" || err != nil {
		t.Fatalf("DynamoDBServer() = %q, %v; want dynalite", name, err)
	}
	o := services.Options{DBPath: filepath.Join(t.TempDir(), "dynamodb.sqlite")}
	p, err := services.StartDynamoDB(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "dynalite" {
		t.Errorf("started %s, want dynalite", p.Name)
	}
	exercise(t, p.Endpoint, "local-table", true)
	p.Stop()

	p, err = services.StartDynamoDB(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	exercise(t, p.Endpoint, "local-table", false)
}

func TestStartDynamoDBNeitherInstalled(t *testing.T) {
	toolsWith(t)
	if _, err := services.StartDynamoDB(context.Background(), services.Options{}); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("error %v, want one that says to run make tools", err)
	}
}

// exercise creates table (or finds it, with its item, when create is
// false), enables TTL on it and writes and reads an item.
func exercise(t *testing.T, endpoint, table string, create bool) {
	t.Helper()
	ctx := context.Background()
	ddb := dynamodb.NewFromConfig(services.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = &endpoint })
	key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}}
	if !create {
		out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key})
		if err != nil || out.Item == nil {
			t.Fatalf("after a restart: item %v, %v; want the one written before", out, err)
		}
		return
	}
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	// dynalite makes a table ACTIVE just after answering CreateTable.
	if err := dynamodb.NewTableExistsWaiter(ddb, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 10 * time.Millisecond }).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ttl, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := ttl.TimeToLiveSpecification; s == nil || aws.ToString(s.AttributeName) != "expires_at" || !aws.ToBool(s.Enabled) {
		t.Errorf("UpdateTimeToLive answered %+v", s)
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key}); err != nil {
		t.Fatal(err)
	}
	if out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key}); err != nil || out.Item == nil {
		t.Fatalf("GetItem: %v, %v", out, err)
	}
}
