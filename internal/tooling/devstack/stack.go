// Package devstack runs the whole system on 127.0.0.1 without an AWS
// account or Docker: dynoxide for DynamoDB, Versity Gateway (or MinIO,
// Config.S3) for S3, the two
// functions (in-process, or the built bootstraps under the Lambda Runtime
// Interface Emulator), and a front door that plays API Gateway (HTTP API,
// payload v2, CORS, a JWT authorizer that does not check signatures) and
// S3 event notifications as AWS shapes them.
//
// The table, bucket CORS, routes and API CORS are read from template.yaml,
// so the local system is the deployed one, not a restatement of it.
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/handlers/finalize"
	"github.com/onceupload/onceupload/internal/handlers/httpapi"
	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/wiring"
	"github.com/onceupload/onceupload/internal/wiring/events"
)

// Local credentials and region, fixed so anyone can script against the stack.
const (
	AccessKey = services.AccessKey
	SecretKey = services.SecretKey
	Region    = services.Region
)

// Config of a stack. Zero ports pick free ones.
type Config struct {
	// Template is the SAM template. Defaults to template.yaml.
	Template string
	// DataDir keeps DynamoDB's and S3's data and the logs.
	DataDir string
	// Ports on 127.0.0.1.
	APIPort, DynamoPort, S3Port int
	// S3 is the S3 server: Versity Gateway (the default) or MinIO
	// (DEV_S3=minio).
	S3 services.S3Server
	// Table and Bucket names.
	Table, Bucket string
	// Origins allowed by CORS on the API and the bucket (ALLOWED_ORIGINS),
	// besides the stack's own demo's, which are always allowed (see
	// AllowedOrigins). Defaults to "*".
	Origins []string
	// RIE runs the bootstraps in BootstrapDir/<LogicalId>/bootstrap under
	// the Runtime Interface Emulator instead of in-process handlers.
	RIE          bool
	BootstrapDir string
	// Env gives the functions' other settings (IDEMPOTENCY_TTL, …).
	Env func(string) (string, bool)
	// Logger receives the stack's and the in-process functions' logs.
	Logger *slog.Logger
	// StaticDir, if set, is served for GET requests that match no route
	// (the browser demo: web/dist).
	StaticDir string
	// APIOptions, if set, are added to the in-process functions' DynamoDB
	// and S3 clients (the benchmark counts their attempts).
	APIOptions []func(*middleware.Stack) error
	// InvocationContext, if set, gives each invocation of an in-process
	// function the context it returns for that function's logical id, so
	// that APIOptions can tell whose role a call would need (the
	// permission tests of internal/checks/iamcheck).
	InvocationContext func(ctx context.Context, function string) context.Context
	// FunctionDynamo, if set, is given the DynamoDB server's endpoint and
	// returns the one the functions use (the chaos run puts a fault-injecting
	// proxy there).
	FunctionDynamo func(serverURL string) (string, error)
	// Deliver, if set, decides how each S3 notification reaches the
	// ObjectCreated function: how many copies (0 drops it) and after what
	// delay (a later one overtakes an earlier one). Defaults to once, now.
	Deliver func() (copies int, delay time.Duration)
	// FunctionTimeout, if set, replaces every function's Timeout from the
	// template: an invocation's context ends then, as on Lambda.
	FunctionTimeout time.Duration
	// FunctionEventBus, if set, is given the local event bus's endpoint
	// and returns the one the stream function puts events to (the chaos
	// run puts a fault-injecting proxy there).
	FunctionEventBus func(busURL string) (string, error)
	// EventsURL, if set, receives every upload event the stack's event
	// bus is given: a POST of the EventBridge JSON envelope, retried until
	// it answers 2xx (DEV_EVENTS_URL in make dev). Each event is logged
	// either way.
	EventsURL string
	// Concurrency caps the instances of each function, as a reserved
	// concurrency does; more invocations wait for a free instance. Each
	// instance serves one invocation at a time. Defaults to
	// DefaultConcurrency.
	Concurrency int
}

// Stack is a running local system.
type Stack struct {
	APIURL, DynamoURL, S3URL string
	S3Server                 services.S3Server // Config.S3
	Table, Bucket            string
	Mode                     string
	// Origins are the origins the API's and the bucket's CORS allow:
	// Config.Origins and the demo's own (AllowedOrigins).
	Origins []string

	cfg               Config
	spec              *Spec
	functionDynamoURL string
	procs             procList
	servers           []*http.Server
	invokers          map[string]*functionPool
	// pending is the work that goes on in the background: finalize
	// invocations, shard pollers and event POSTs. Close waits for it.
	pending sync.WaitGroup
	// ctx lives as long as the stack: Close cancels it first, which stops
	// the pollers and POSTs (and the waits before a finalize retry) at once.
	ctx       context.Context
	cancel    context.CancelFunc
	s3        *s3.Client
	multipart completions
	// EventBusURL is the local event bus (PutEvents), if the template has
	// a stream function.
	EventBusURL string
	// EventsEnabled reports that the table's stream is read: upload
	// events are delivered (not on dynalite, which has no streams).
	EventsEnabled    bool
	functionEventBus string
	tableCreated     bool
}

// Start starts everything, or nothing: on error, what was started is
// stopped.
func Start(ctx context.Context, cfg Config) (st *Stack, err error) {
	if cfg.Template == "" {
		cfg.Template = "template.yaml"
	}
	if len(cfg.Origins) == 0 {
		cfg.Origins = []string{"*"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.S3 == "" {
		cfg.S3 = services.Versity
	}
	if cfg.Env == nil {
		cfg.Env = func(string) (string, bool) { return "", false }
	}
	spec, err := LoadSpec(cfg.Template)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(spec.Routes, func(a, b Route) int { return strings.Compare(a.Key(), b.Key()) })
	for _, dir := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, "logs"), filepath.Join(cfg.DataDir, "s3")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	st = &Stack{cfg: cfg, spec: spec, S3Server: cfg.S3, Table: cfg.Table, Bucket: cfg.Bucket, invokers: map[string]*functionPool{}, Mode: "in-process"}
	// Not Start's ctx, which may end when Start returns: the stack's
	// background work ends with Close.
	st.ctx, st.cancel = context.WithCancel(context.Background())
	if cfg.RIE {
		st.Mode = "Runtime Interface Emulator"
	}
	defer func() {
		if err != nil {
			st.Close()
			st = nil
		}
	}()
	logs := func(name string) string { return filepath.Join(cfg.DataDir, "logs", name+".log") }

	// The API listens first: its port names the demo's own origins, which
	// the bucket's CORS rules (made below) allow as the API's do. It
	// answers once everything behind it runs.
	apiListener, err := listen(cfg.APIPort)
	if err != nil {
		return st, err
	}
	apiServed := false
	defer func() {
		if !apiServed {
			_ = apiListener.Close()
		}
	}()
	st.APIURL = "http://" + apiListener.Addr().String()
	st.Origins = AllowedOrigins(cfg.Origins, apiListener.Addr().(*net.TCPAddr).Port)

	ddb, err := services.StartDynamoDB(ctx, services.Options{Port: cfg.DynamoPort, LogPath: logs("dynamodb"), DBPath: filepath.Join(cfg.DataDir, "dynamodb.sqlite")})
	if err != nil {
		return st, err
	}
	_ = st.procs.add(ddb)
	st.DynamoURL, st.functionDynamoURL = ddb.Endpoint, ddb.Endpoint
	if cfg.FunctionDynamo != nil {
		if st.functionDynamoURL, err = cfg.FunctionDynamo(ddb.Endpoint); err != nil {
			return st, err
		}
	}

	// The S3 server exits at start-up unless its webhook already listens.
	hookURL, err := st.serve(http.HandlerFunc(st.handleS3Notification), 0)
	if err != nil {
		return st, err
	}
	gw, err := services.StartS3(ctx, cfg.S3, services.S3Options{
		Options: services.Options{Port: cfg.S3Port, LogPath: logs(cfg.S3.Binary())},
		DataDir: filepath.Join(cfg.DataDir, "s3"), AccessKey: AccessKey, SecretKey: SecretKey,
		WebhookURL: hookURL + "/s3-events", CORSOrigins: st.Origins,
	})
	if err != nil {
		return st, err
	}
	_ = st.procs.add(gw)
	st.S3URL = gw.Endpoint

	if err := st.createResources(ctx); err != nil {
		return st, err
	}
	if st.spec.Stream != nil {
		if st.EventBusURL, err = st.serve(http.HandlerFunc(st.handleEventBus), 0); err != nil {
			return st, err
		}
		st.functionEventBus = st.EventBusURL
		if cfg.FunctionEventBus != nil {
			if st.functionEventBus, err = cfg.FunctionEventBus(st.EventBusURL); err != nil {
				return st, err
			}
		}
	}
	if err := st.startFunctions(ctx); err != nil {
		return st, err
	}
	if err := st.startStreams(ctx, st.tableCreated); err != nil {
		return st, err
	}
	st.serveOn(apiListener, http.HandlerFunc(st.handleAPI))
	apiServed = true
	return st, nil
}

// AllowedOrigins are the origins a stack's CORS allows, on the API and on
// the bucket: the configured ones (ALLOWED_ORIGINS; none is "*") and,
// always, the stack's own demo's, which the API serves at
// http://127.0.0.1:PORT, also reached as http://localhost:PORT (a browser
// sends either as the page's origin). Narrowing the list to a site's
// origin must not lock the demo out of the bucket. "*" allows every
// origin, the demo's among them: it is then the whole list.
func AllowedOrigins(configured []string, apiPort int) []string {
	var out []string
	for _, o := range configured {
		if o = strings.TrimSpace(o); o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	if len(out) == 0 || slices.Contains(out, "*") {
		return []string{"*"}
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if o := fmt.Sprintf("http://%s:%d", host, apiPort); !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// serve starts an HTTP server on 127.0.0.1:port and returns its URL.
func (st *Stack) serve(h http.Handler, port int) (string, error) {
	l, err := listen(port)
	if err != nil {
		return "", err
	}
	return st.serveOn(l, h), nil
}

// listen listens on 127.0.0.1:port (0: a free port).
func listen(port int) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w", port, err)
	}
	return l, nil
}

// serveOn serves h on l, until Close, and returns its URL.
func (st *Stack) serveOn(l net.Listener, h http.Handler) string {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	st.servers = append(st.servers, srv)
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String()
}

func (st *Stack) awsConfig() aws.Config {
	return services.AWSConfig()
}

// createResources makes the table and bucket as template.yaml declares
// them; on a second start they already exist, which is fine (a table from
// before the template gained an index gets it).
func (st *Stack) createResources(ctx context.Context) error {
	t := st.spec.Table
	ddb := dynamodb.NewFromConfig(st.awsConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = &st.DynamoURL })
	attr := func(name string) dbtypes.AttributeDefinition {
		return dbtypes.AttributeDefinition{AttributeName: aws.String(name), AttributeType: dbtypes.ScalarAttributeType(t.AttributeDefs[name])}
	}
	in := &dynamodb.CreateTableInput{
		TableName:            &st.Table,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: &t.PartitionKey, AttributeType: dbtypes.ScalarAttributeType(t.KeyType)}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: &t.PartitionKey, KeyType: dbtypes.KeyTypeHash}},
		BillingMode:          dbtypes.BillingMode(t.BillingMode),
	}
	if t.StreamViewType != "" {
		in.StreamSpecification = &dbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dbtypes.StreamViewType(t.StreamViewType)}
	}
	defined := map[string]bool{t.PartitionKey: true}
	for _, ix := range t.Indexes {
		for _, k := range []string{ix.PartitionKey, ix.SortKey} {
			if k != "" && !defined[k] {
				defined[k] = true
				in.AttributeDefinitions = append(in.AttributeDefinitions, attr(k))
			}
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, globalIndex(ix))
	}
	_, err := ddb.CreateTable(ctx, in)
	var inUse *dbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", st.Table, err)
	}
	st.tableCreated = err == nil
	if err != nil {
		if err := st.addMissingIndexes(ctx, ddb, in); err != nil {
			return err
		}
	}
	if t.TTLAttribute != "" && err == nil {
		if _, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               &st.Table,
			TimeToLiveSpecification: &dbtypes.TimeToLiveSpecification{AttributeName: &t.TTLAttribute, Enabled: aws.Bool(true)},
		}); err != nil {
			return fmt.Errorf("enable TTL on %s: %w", st.Table, err)
		}
	}

	s3c := s3.NewFromConfig(st.awsConfig(), func(o *s3.Options) { o.BaseEndpoint = &st.S3URL; o.UsePathStyle = true })
	st.s3 = s3c
	_, err = s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &st.Bucket})
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("create bucket %s: %w", st.Bucket, err)
	}
	var rules []s3types.CORSRule
	for _, r := range st.spec.Bucket.CORSRules {
		rules = append(rules, s3types.CORSRule{
			AllowedMethods: r.AllowedMethods, AllowedHeaders: r.AllowedHeaders, ExposeHeaders: r.ExposedHeaders,
			AllowedOrigins: st.Origins, MaxAgeSeconds: aws.Int32(r.MaxAge),
		})
	}
	if st.S3Server == services.MinIO {
		// MinIO has no bucket CORS (PutBucketCors is not implemented):
		// its server-wide CORS allows st.Origins (services.StartMinIO).
		// Nor does it send a bucket's events unsubscribed.
		return st.subscribeMinIO(ctx, s3c)
	}
	if len(rules) > 0 {
		if _, err := s3c.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: &st.Bucket, CORSConfiguration: &s3types.CORSConfiguration{CORSRules: rules}}); err != nil {
			return fmt.Errorf("bucket CORS: %w", err)
		}
	}
	return nil
}

// subscribeMinIO sends the bucket's ObjectCreated events to the stack's
// webhook, which Versity Gateway does for every bucket unasked (and AWS
// for the bucket the template subscribes).
func (st *Stack) subscribeMinIO(ctx context.Context, s3c *s3.Client) error {
	_, err := s3c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: &st.Bucket,
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			QueueArn: aws.String(services.MinIOWebhookARN), Events: []s3types.Event{"s3:ObjectCreated:*"},
		}}},
	})
	if err != nil {
		return fmt.Errorf("bucket %s's event notifications on MinIO: %w", st.Bucket, err)
	}
	return nil
}

// globalIndex is ix as CreateTable and UpdateTable take it.
func globalIndex(ix IndexSpec) dbtypes.GlobalSecondaryIndex {
	keys := []dbtypes.KeySchemaElement{{AttributeName: aws.String(ix.PartitionKey), KeyType: dbtypes.KeyTypeHash}}
	if ix.SortKey != "" {
		keys = append(keys, dbtypes.KeySchemaElement{AttributeName: aws.String(ix.SortKey), KeyType: dbtypes.KeyTypeRange})
	}
	return dbtypes.GlobalSecondaryIndex{
		IndexName: aws.String(ix.Name), KeySchema: keys,
		Projection: &dbtypes.Projection{ProjectionType: dbtypes.ProjectionType(ix.ProjectionType), NonKeyAttributes: ix.NonKeyAttributes},
	}
}

// addMissingIndexes gives a table made by an older template (a data
// directory kept across an upgrade) the indexes the template declares
// now, one UpdateTable each, as a CloudFormation update would.
func (st *Stack) addMissingIndexes(ctx context.Context, ddb *dynamodb.Client, want *dynamodb.CreateTableInput) error {
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &st.Table})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", st.Table, err)
	}
	have := map[string]bool{}
	for _, ix := range out.Table.GlobalSecondaryIndexes {
		have[aws.ToString(ix.IndexName)] = true
	}
	for _, ix := range want.GlobalSecondaryIndexes {
		if have[aws.ToString(ix.IndexName)] {
			continue
		}
		_, err := ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:            &st.Table,
			AttributeDefinitions: want.AttributeDefinitions,
			GlobalSecondaryIndexUpdates: []dbtypes.GlobalSecondaryIndexUpdate{{Create: &dbtypes.CreateGlobalSecondaryIndexAction{
				IndexName: ix.IndexName, KeySchema: ix.KeySchema, Projection: ix.Projection,
			}}},
		})
		if err != nil {
			return fmt.Errorf("add index %s to table %s (or delete the data directory to start afresh): %w", aws.ToString(ix.IndexName), st.Table, err)
		}
	}
	return nil
}

// functionEnv is every function's environment: the stack's names and
// endpoints over the caller's settings.
func (st *Stack) functionEnv() map[string]string {
	env := map[string]string{}
	for _, name := range []string{"IDEMPOTENCY_TTL", "PRESIGN_TTL", "MAX_UPLOAD_BYTES", "ALLOWED_CONTENT_TYPES", "ABORT_INCOMPLETE_DAYS", "MAX_PENDING_MULTIPART_PER_TENANT", "METRICS_NAMESPACE"} {
		if v, ok := st.cfg.Env(name); ok {
			env[name] = v
		}
	}
	// These are the caller's value, else the template parameter's default.
	params := map[string]string{"UPLOAD_PREFIX": "UploadPrefix"}
	if st.EventBusURL != "" {
		params["EVENT_BUS_NAME"], params["EVENT_SOURCE"] = "EventBusName", "EventSource"
		env["AWS_ENDPOINT_URL_EVENTBRIDGE"] = st.functionEventBus
	}
	for name, param := range params {
		if v, ok := st.cfg.Env(name); ok {
			env[name] = v
		} else if d := st.spec.Parameters[param]; d != "" {
			env[name] = d
		}
	}
	for k, v := range map[string]string{
		"TABLE_NAME": st.Table, "BUCKET_NAME": st.Bucket,
		"AWS_ENDPOINT_URL_DYNAMODB": st.functionDynamoURL, "AWS_ENDPOINT_URL_S3": st.S3URL, "S3_FORCE_PATH_STYLE": "true",
		"AWS_ACCESS_KEY_ID": AccessKey, "AWS_SECRET_ACCESS_KEY": SecretKey, "AWS_REGION": Region,
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		env[k] = v
	}
	return env
}

func (st *Stack) startFunctions(ctx context.Context) error {
	env := st.functionEnv()
	functions := []string{st.spec.ObjectCreatedFunction}
	if st.spec.Stream != nil {
		functions = append(functions, st.spec.Stream.Function)
	}
	for _, r := range st.spec.Routes {
		if !slices.Contains(functions, r.Function) {
			functions = append(functions, r.Function)
		}
	}
	if st.cfg.RIE {
		for _, fn := range functions {
			st.invokers[fn] = newFunctionPool(fn, st.cfg.Concurrency, st.rieStarter(fn, env))
		}
	} else {
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		local := services.AWSConfig()
		// One service for every instance: the presign section holds the
		// finalize one.
		svc, cfg, err := wiring.Presign(ctx, lookup, st.cfg.Logger,
			wiring.Local(st.functionDynamoURL, st.S3URL, local.Credentials, local.Region, st.cfg.APIOptions...))
		if err != nil {
			return err
		}
		var onStream any
		if st.spec.Stream != nil {
			p, err := events.New(ctx, lookup, st.cfg.Logger,
				events.Local(st.functionEventBus, local.Credentials, local.Region, st.cfg.APIOptions...))
			if err != nil {
				return err
			}
			onStream = p.Handle
		}
		// Each logical id gets the handler of its kind, as its bootstrap
		// would; every instance has its own, sharing the service (its AWS
		// clients are safe for concurrent use).
		for _, fn := range functions {
			rec := &telemetry.Recorder{Logger: st.cfg.Logger, Namespace: cfg.MetricsNamespace, Function: "presign"}
			var handler any = (&httpapi.Handler{Service: svc, AllowAnonymous: cfg.AllowAnonymous, Logger: st.cfg.Logger, Telemetry: rec}).Handle
			switch {
			case fn == st.spec.ObjectCreatedFunction:
				rec.Function = "finalize"
				handler = (&finalize.Handler{Service: svc, Logger: st.cfg.Logger, Telemetry: rec}).Handle
			case st.spec.Stream != nil && fn == st.spec.Stream.Function:
				handler = onStream
			}
			st.invokers[fn] = newFunctionPool(fn, st.cfg.Concurrency, func(context.Context) (Invoker, error) {
				h := lambda.NewHandler(handler)
				if with := st.cfg.InvocationContext; with != nil {
					return withContext{h, func(ctx context.Context) context.Context { return with(ctx, fn) }}, nil
				}
				return h, nil
			})
		}
	}
	// One warm instance each, so that a missing or broken bootstrap fails
	// the start rather than the first request.
	for _, fn := range functions {
		if err := st.invokers[fn].warm(ctx); err != nil {
			return err
		}
	}
	return nil
}

// rieStarter starts instances of fn: its bootstrap under its own emulator.
func (st *Stack) rieStarter(fn string, env map[string]string) func(ctx context.Context) (Invoker, error) {
	bootstrap := filepath.Join(st.cfg.BootstrapDir, fn, "bootstrap")
	secs := max(int(st.timeout(fn).Seconds()), 1)
	vars := []string{"AWS_LAMBDA_FUNCTION_NAME=" + fn, "AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(secs), "AWS_LAMBDA_LOG_FORMAT=JSON"}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	var starting sync.Mutex
	return func(ctx context.Context) (Invoker, error) {
		// One start at a time: each picks free ports, and two picked at
		// once could be the same, leaving two instances on one emulator.
		starting.Lock()
		defer starting.Unlock()
		p, err := services.StartRIE(ctx, services.RIEOptions{
			Options:   services.Options{LogPath: filepath.Join(st.cfg.DataDir, "logs", fn+".log")},
			Bootstrap: bootstrap, Env: vars,
		})
		if err != nil {
			return nil, fmt.Errorf("%s under the emulator (build it with make build LAMBDA_ARCH=%s): %w", fn, runtime.GOARCH, err)
		}
		if err := st.procs.add(p); err != nil {
			return nil, err
		}
		return &rieInvoker{url: p.Endpoint + services.InvokePath, proc: p}, nil
	}
}

// handleAPI is API Gateway: route, CORS, authorizer, event, invoke, answer.
func (st *Stack) handleAPI(w http.ResponseWriter, r *http.Request) {
	if st.spec.API.cors(w, r, st.Origins) {
		return
	}
	route, params, ok := matchRoute(st.spec.Routes, r.Method, r.URL.Path)
	if !ok && st.cfg.StaticDir != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		http.FileServer(http.Dir(st.cfg.StaticDir)).ServeHTTP(w, r)
		return
	}
	if !ok {
		apiMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	claims, err := jwtClaims(r.Header.Get("Authorization"))
	if err != nil {
		apiMessage(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	body, err := readBody(r)
	if err != nil {
		apiMessage(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > maxPayload {
		apiMessage(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	ev := buildEvent(r, route, params, claims, body, time.Now(), newID())
	payload, err := eventJSON(ev)
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), st.timeout(route.Function))
		payload, err = st.invokers[route.Function].Invoke(ctx, payload)
		cancel()
	}
	if err == nil {
		err = writeResponse(w, payload)
		if err == nil {
			return
		}
	}
	st.cfg.Logger.Error("front door: function failed", "function", route.Function, "error", err)
	apiMessage(w, http.StatusInternalServerError, "Internal Server Error")
}

// handleS3Notification receives the S3 server's webhook and invokes the
// ObjectCreated function asynchronously, as S3 does, with Lambda's two
// retries on error (seconds apart here, minutes on AWS).
func (st *Stack) handleS3Notification(w http.ResponseWriter, r *http.Request) {
	payload, err := io.ReadAll(io.LimitReader(r.Body, maxPayload))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ev, ok, err := TranslateS3Event(payload, time.Now(), newID)
	if err != nil {
		st.cfg.Logger.Error("front door: bad S3 notification", "error", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
	if ok {
		ev = st.fixMultipartRecords(r.Context(), ev)
	}
	if !ok || len(ev.Records) == 0 {
		return
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		st.cfg.Logger.Error("front door: encode S3 event", "error", err)
		return
	}
	copies, delay := 1, time.Duration(0)
	if st.cfg.Deliver != nil {
		copies, delay = st.cfg.Deliver()
	}
	for range copies {
		st.pending.Add(1)
		go st.deliver(raw, delay)
	}
}

// timeout is fn's Timeout: the configured one, else the template's, else
// Lambda's default of 3 seconds.
func (st *Stack) timeout(fn string) time.Duration {
	switch {
	case st.cfg.FunctionTimeout > 0:
		return st.cfg.FunctionTimeout
	case st.spec.Timeouts[fn] > 0:
		return st.spec.Timeouts[fn]
	}
	return 3 * time.Second
}

// fixMultipartRecords makes CompleteMultipartUpload records say what AWS's
// do. Versity Gateway reports their size as 0 (AWS: the object's size) and
// sends one per Complete call, repeated ones included (AWS: one per object
// created), so the size is read from the object and a repeat is dropped.
func (st *Stack) fixMultipartRecords(ctx context.Context, ev S3Notification) S3Notification {
	kept := ev.Records[:0]
	for _, rec := range ev.Records {
		if rec.EventName != "ObjectCreated:CompleteMultipartUpload" {
			kept = append(kept, rec)
			continue
		}
		o := &rec.S3.Object
		if !st.multipart.first(rec.S3.Bucket.Name + "/" + o.Key + "@" + o.ETag) {
			continue
		}
		key, err := url.QueryUnescape(o.Key)
		if err == nil {
			var head *s3.HeadObjectOutput
			if head, err = st.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &rec.S3.Bucket.Name, Key: &key}); err == nil {
				o.Size = aws.ToInt64(head.ContentLength)
			}
		}
		if err != nil {
			st.cfg.Logger.Warn("front door: cannot read a completed multipart object's size", "key", o.Key, "error", err)
		}
		kept = append(kept, rec)
	}
	ev.Records = kept
	return ev
}

// completions remembers the multipart objects already announced.
type completions struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether id is new, and remembers it. The memory is bounded:
// it starts over past 100,000 objects, a repeat that late being as harmless
// as any duplicate event.
func (c *completions) first(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= 100_000 {
		c.seen = map[string]bool{}
	}
	if c.seen[id] {
		return false
	}
	c.seen[id] = true
	return true
}

// deliver invokes the ObjectCreated function with an S3 event after delay,
// with Lambda's two retries on error.
func (st *Stack) deliver(raw []byte, delay time.Duration) {
	fn := st.spec.ObjectCreatedFunction
	defer st.pending.Done()
	for attempt := 0; attempt < 3; attempt++ {
		wait := delay
		if attempt > 0 {
			wait = time.Duration(attempt) * time.Second
		}
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-st.ctx.Done():
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), st.timeout(fn))
		_, err := st.invokers[fn].Invoke(ctx, raw)
		cancel()
		if err == nil {
			return
		}
		st.cfg.Logger.Warn("front door: finalize failed", "attempt", attempt+1, "error", err)
	}
	st.cfg.Logger.Error("front door: S3 event dropped after 3 attempts (AWS would send it to the on-failure queue)")
}

// Close stops every server and child process and waits for them and for
// the work in flight, which the cancelled stack context cuts short.
func (st *Stack) Close() error {
	if st.ctx.Err() != nil {
		return nil
	}
	st.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, srv := range slices.Backward(st.servers) {
		_ = srv.Shutdown(ctx)
	}
	st.pending.Wait()
	st.procs.stopAll()
	return nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}
