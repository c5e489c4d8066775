// Package testenv gives tests real local DynamoDB, S3 and Redis servers, each
// started for the test that asks and stopped when it ends, and the
// functions' bootstraps (Bootstraps), built once per test binary.
//
// When a server's binary is missing the test is skipped, unless
// REQUIRE_INTEGRATION=1 (set by `make test` and CI), where it fails: a
// skipped integration test must never pass for a green run.
//
// Under go test -short (make unit) every helper here that starts a server
// or needs a tool from scripts/install-tools.sh skips its test before
// starting anything, whether or not the tools are installed.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/redis/go-redis/v9"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/pkg/api"
)

// Region, AccessKey and SecretKey are the local servers' static settings.
const (
	Region    = services.Region
	AccessKey = services.AccessKey
	SecretKey = services.SecretKey
)

func need(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("REQUIRE_INTEGRATION") == "1" || os.Getenv(services.NoServersEnv) == "1" {
		t.Fatalf("integration server unavailable: %v", err)
	}
	t.Skipf("integration server unavailable (set REQUIRE_INTEGRATION=1 to fail instead): %v", err)
}

// SkipShort skips t under go test -short (make unit): it needs a local
// server or a tool that scripts/install-tools.sh installs. The helpers of
// this package call it; a test that starts a server by other means calls
// it first.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a local server or an installed tool: skipped under -short (make unit)")
	}
}

func stopAtEnd(t testing.TB, p *services.Process) {
	t.Cleanup(func() { _ = p.Stop() })
}

// AWSConfig is an SDK config for local servers: static credentials, fixed
// region, no shared config files read.
func AWSConfig() aws.Config { return services.AWSConfig() }

// Dynoxide starts a dynoxide server and returns its endpoint.
func Dynoxide(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	p, err := services.StartDynoxide(context.Background(), services.Options{})
	need(t, err)
	stopAtEnd(t, p)
	return p.Endpoint
}

// Versity starts an S3 server on a temporary directory and returns its
// endpoint.
func Versity(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	p, err := services.StartVersity(context.Background(), services.S3Options{
		DataDir: t.TempDir() + "/data", AccessKey: AccessKey, SecretKey: SecretKey,
	})
	need(t, err)
	stopAtEnd(t, p)
	return p.Endpoint
}

// Moto starts moto's server (SQS among other APIs) and returns its
// endpoint.
func Moto(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	p, err := services.StartMoto(context.Background(), services.Options{})
	need(t, err)
	stopAtEnd(t, p)
	return p.Endpoint
}

// Redis starts redis-server (Debian's, on PATH) with nothing persisted and
// returns its URL, redis://127.0.0.1:PORT.
func Redis(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	p, err := startRedis(context.Background())
	need(t, err)
	stopAtEnd(t, p)
	return p.Endpoint
}

// RedisClient returns a client of url (Redis's or SharedRedis'), closed
// when t ends, that does not retry: a test sees every error.
func RedisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startRedis starts redis-server on a free port, and on another when the
// one it was given is taken before the server binds it (the server then
// exits at start-up).
func startRedis(ctx context.Context) (p *services.Process, err error) {
	for range 3 {
		if p, err = services.StartRedis(ctx, services.Options{}); err == nil {
			return p, nil
		}
		if _, missing := services.RedisBinary(); missing != nil {
			return nil, err
		}
	}
	return nil, err
}

// Counter counts SDK calls; see package callcount.
type Counter = callcount.Counter

// DynamoClient returns a client for endpoint that counts its calls in c (if
// not nil).
func DynamoClient(endpoint string, c *Counter) *dynamodb.Client {
	return dynamodb.NewFromConfig(AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		if c != nil {
			o.APIOptions = append(o.APIOptions, c.Middleware)
		}
	})
}

// S3Client returns a path-style client for endpoint that counts its calls in
// c (if not nil).
func S3Client(endpoint string, c *Counter) *s3.Client {
	return s3.NewFromConfig(AWSConfig(), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		if c != nil {
			o.APIOptions = append(o.APIOptions, c.Middleware)
		}
	})
}

// NewTable creates a table shaped as template.yaml declares it (string
// partition key "pk", the GroupIndex, on-demand) with a unique name, and
// returns the name. internal/tooling/devstack's tests hold the shape to the
// template's.
func NewTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	return NewTableWithKey(t, client, "pk", "", GroupIndex)
}

// Index is a global secondary index of a test table, keys only: a string
// partition key and a number sort key.
type Index struct {
	Name, PartitionKey, SortKey string
}

// GroupIndex is template.yaml's index, the one pkg/idempotency/recordstore's default
// Schema counts groups with.
var GroupIndex = Index{Name: "by_group", PartitionKey: "group", SortKey: "expires_at"}

// NewTableWithKey creates an on-demand table with a unique name whose
// string partition key is named partitionKey and, unless sortKey is empty,
// whose string sort key is named sortKey, with indexes; it returns the
// name.
func NewTableWithKey(t testing.TB, client *dynamodb.Client, partitionKey, sortKey string, indexes ...Index) string {
	t.Helper()
	name := "test-" + randomHex(6)
	in := &dynamodb.CreateTableInput{
		TableName:            &name,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(partitionKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(partitionKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}
	if sortKey != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(sortKey), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(sortKey), KeyType: types.KeyTypeRange})
	}
	for _, ix := range indexes {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(ix.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(ix.SortKey), AttributeType: types.ScalarAttributeTypeN})
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.Name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(ix.PartitionKey), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(ix.SortKey), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		})
	}
	if _, err := client.CreateTable(context.Background(), in); err != nil {
		t.Fatalf("create table: %v", err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 10 * time.Millisecond })
	if err := waiter.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: &name}, 10*time.Second); err != nil {
		t.Fatalf("table %s not active: %v", name, err)
	}
	return name
}

// NewBucket creates a bucket with a unique name and returns the name.
func NewBucket(t testing.TB, client *s3.Client) string {
	t.Helper()
	name := "test-" + randomHex(6)
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return name
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Shared is a server started on first use and shared by the tests of one
// package; TestMain calls Stop after m.Run so the package stops what it
// started.
type Shared struct {
	start func(context.Context) (*services.Process, error)
	once  sync.Once
	proc  *services.Process
	err   error
	dir   string // removed by Stop
}

// SharedDynoxide, SharedDynalite and SharedVersity describe lazily started
// servers.
func SharedDynoxide() *Shared {
	return &Shared{start: func(ctx context.Context) (*services.Process, error) {
		return services.StartDynoxide(ctx, services.Options{})
	}}
}

// SharedDynalite starts dynalite on first use.
func SharedDynalite() *Shared {
	return &Shared{start: func(ctx context.Context) (*services.Process, error) {
		return services.StartDynalite(ctx, services.Options{})
	}}
}

// SharedVersity starts Versity Gateway on a fresh temporary directory on
// first use.
func SharedVersity() *Shared {
	s := &Shared{}
	s.start = func(ctx context.Context) (*services.Process, error) {
		dir, err := os.MkdirTemp("", "onceupload-s3-")
		if err != nil {
			return nil, err
		}
		s.dir = dir
		return services.StartVersity(ctx, services.S3Options{DataDir: dir + "/data", AccessKey: AccessKey, SecretKey: SecretKey})
	}
	return s
}

// S3 is the S3 server that the integration tests of packages written for
// both run on: TEST_S3, "versity" (the default) or "minio". make test runs
// them on Versity Gateway, then a named subset again with TEST_S3=minio.
// An unknown name fails the tests (Main, StackS3), never skips them.
func S3() services.S3Server {
	s, _ := services.ParseS3Server(os.Getenv("TEST_S3"))
	return s
}

// s3Server is S3, or why TEST_S3 names none.
func s3Server() (services.S3Server, error) { return services.ParseS3Server(os.Getenv("TEST_S3")) }

// StackS3 is the S3 server for a test's local stack (devstack.Config.S3):
// S3, once its binary is known to be installed (t is skipped, or under
// REQUIRE_INTEGRATION=1 fails, otherwise).
func StackS3(t testing.TB) services.S3Server {
	t.Helper()
	SkipShort(t)
	s, err := s3Server()
	if err != nil {
		t.Fatalf("TEST_S3: %v", err)
	}
	RequireTools(t, s.Binary())
	return s
}

// SkipOnS3 skips t when the tests run on server, saying why: for a case
// that only a documented difference of that server's fails (never a
// reason to delete the case or to bend the product to the server).
func SkipOnS3(t testing.TB, server services.S3Server, why string) {
	t.Helper()
	if S3() == server {
		t.Skipf("skipped on %s: %s", server.Title(), why)
	}
}

// SharedS3 starts S3 (TEST_S3's server) on a fresh temporary directory on
// first use.
func SharedS3() *Shared {
	s := &Shared{}
	s.start = func(ctx context.Context) (*services.Process, error) {
		server, err := s3Server()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "onceupload-s3-")
		if err != nil {
			return nil, err
		}
		s.dir = dir
		return services.StartS3(ctx, server, services.S3Options{DataDir: dir + "/data", AccessKey: AccessKey, SecretKey: SecretKey})
	}
	return s
}

// SharedRedis starts redis-server, as Redis does, on first use.
func SharedRedis() *Shared { return &Shared{start: startRedis} }

// Endpoint starts the server if needed and returns its endpoint, skipping or
// failing t when it cannot start.
func (s *Shared) Endpoint(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	s.once.Do(func() { s.proc, s.err = s.start(context.Background()) })
	need(t, s.err)
	return s.proc.Endpoint
}

// Stop stops the server if it was started, and removes its data.
func (s *Shared) Stop() {
	if s.proc != nil {
		_ = s.proc.Stop()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// Main is a TestMain for tests on shared servers or bootstraps: it runs
// the package's tests, stops the servers they started, removes the
// bootstraps they built, and exits with the tests' code.
func Main(m *testing.M, servers ...*Shared) {
	if _, err := s3Server(); err != nil {
		fmt.Fprintln(os.Stderr, "TEST_S3:", err)
		os.Exit(2)
	}
	code := m.Run()
	for _, s := range servers {
		s.Stop()
	}
	removeBootstraps()
	os.Exit(code)
}

// RequireTools skips t (or, under REQUIRE_INTEGRATION=1, fails it) unless
// the named tools are installed.
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	SkipShort(t)
	for _, tool := range tools {
		_, err := services.Binary(tool)
		need(t, err)
	}
}

// RequireToolsDir returns the folder that install-tools.sh installs name
// into (.tools/NAME), with path inside it, skipping t (or, under
// REQUIRE_INTEGRATION=1, failing it) when path is not there.
func RequireToolsDir(t testing.TB, name, path string) string {
	t.Helper()
	SkipShort(t)
	tools, err := services.ToolsDir()
	need(t, err)
	dir := filepath.Join(tools, name)
	if _, err := os.Stat(filepath.Join(dir, path)); err != nil {
		need(t, fmt.Errorf("%s is not installed in %s: run `make tools` (scripts/install-tools.sh): %w", name, dir, err))
	}
	return dir
}

// PutPresigned sends body to an upload's presigned URL with plain net/http
// and the headers the upload lists, changed by tweak (if not nil), and
// returns S3's status code.
func PutPresigned(u api.Upload, body []byte, tweak func(*http.Request)) (int, error) {
	if u.Upload == nil {
		return 0, fmt.Errorf("upload %s has no PUT instructions (status %s)", u.UploadID, u.Status)
	}
	return services.PutSigned(context.Background(), *u.Upload, body, tweak)
}

// PutPart sends a part's bytes to its presigned URL with the headers it
// lists and returns S3's status. A refusal before the body is read may
// surface as a reset connection: that is reported as 499, a refusal too.
func PutPart(p api.SignedPart, body []byte) int {
	code, err := services.PutSigned(context.Background(), p.PutInstructions, body, nil)
	if err != nil {
		return 499
	}
	return code
}

// StartFunction starts the function of functions/<name> (presign,
// finalize, events) under the Runtime Interface Emulator with env, its
// bootstrap built for this machine (Bootstraps: the package's TestMain
// must be Main); it returns the emulator's base URL, which serves
// Lambda's Invoke API for the function named "function"
// (services.InvokePath). It is stopped when the test ends.
func StartFunction(t testing.TB, name string, env []string) string {
	t.Helper()
	SkipShort(t)
	RequireTools(t, "aws-lambda-rie")
	i := slices.IndexFunc(functions, func(fn function) bool { return fn.dir == name })
	if i < 0 {
		t.Fatalf("StartFunction: no function %q under functions/", name)
	}
	p, err := services.StartRIE(context.Background(), services.RIEOptions{
		Bootstrap: filepath.Join(Bootstraps(t, ""), functions[i].logicalID, "bootstrap"),
		Env:       append(env, "AWS_LAMBDA_FUNCTION_NAME="+name, "AWS_LAMBDA_FUNCTION_TIMEOUT=10"),
	})
	need(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	return p.Endpoint
}
