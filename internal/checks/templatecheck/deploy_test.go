package templatecheck

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// motoLacks are the resource types of the transformed template that moto's
// CloudFormation does not implement (5.2.1). It answers CREATE_COMPLETE
// for them all the same, and lists each as a stack resource with no
// logical id, no physical id and nothing behind it.
var motoLacks = map[string]bool{
	"AWS::ApiGatewayV2::Api":         true,
	"AWS::ApiGatewayV2::Stage":       true,
	"AWS::CloudWatch::Alarm":         true,
	"AWS::Lambda::EventInvokeConfig": true,
	"AWS::S3::BucketPolicy":          true,
}

// TestTemplateDeploysInMoto deploys the transformed template, for both
// access models, into moto's CloudFormation (CreateStack with the SDK, as
// sam deploy would after its transform), waits for CREATE_COMPLETE, and
// checks through each service's own API what moto made of it against what
// the template says: the table's key, billing, NEW_AND_OLD_IMAGES stream
// and GSI; the events function's event source mapping on that stream
// (batch size and window, MaximumRetryAttempts, MaximumRecordAgeInSeconds,
// bisect, ReportBatchItemFailures, the filter, and EventsFailureQueue as
// its on-failure destination: moto keeps them all); the three functions,
// holding the uploaded package, with their roles, runtime, handler,
// timeouts, memory and environment (TABLE_NAME names the table and
// BUCKET_NAME the bucket the stack made: the name derived from the stack
// id agrees in both places); the two failure queues' retention and
// encryption; S3's permission to invoke finalize, scoped to that bucket
// and account, and API Gateway's, one per route; the alarm topic, its key
// and its email subscription; that every alarm's dimensions name a
// function or queue that exists; and the stack's outputs.
//
// What moto 5.2.1 cannot check, found by reading its source and asking it
// (each "dropped" finding is logged again on every run, with -v, so a moto
// that learns more shows here):
//
//   - Its CloudFormation does not implement the HTTP API and its stage,
//     the alarms, finalize's EventInvokeConfig (retries, event age,
//     on-failure queue) or the bucket policy (motoLacks), yet reports them
//     created. So ApiUrl keeps a literal "${HttpApi}", API Gateway's invoke
//     permissions name the API "None", and alarms are checked only for what
//     they point at, never created.
//   - It checks no parameter constraint (AllowedPattern, AllowedValues,
//     MinValue), no Rules and no capabilities: UploadPrefix "no slash", or
//     a JwtIssuer without JwtAudience, deploys.
//   - Of the bucket it applies BucketEncryption only, and of that the
//     algorithm and key but not BucketKeyEnabled (nor does it look the key
//     up): the notification that triggers finalize, CORS, the lifecycle
//     rule that aborts multipart uploads, the public access block and
//     ownership controls are dropped.
//   - Of the table it drops TimeToLiveSpecification, PointInTimeRecovery
//     and SSESpecification (it reads SSE's API spelling, Enabled, not
//     CloudFormation's SSEEnabled).
//   - Of the functions it drops Architectures (it says x86_64),
//     TracingConfig (PassThrough even with Tracing=Active) and
//     LoggingConfig (JSON format, the template's log groups). It resolves a
//     Number parameter to a JSON number, which the SDK cannot read back
//     from a function's environment, so forMoto wraps those in Fn::Join.
//   - It checks the code's S3 location only for a missing bucket (CreateStack
//     fails); a missing key deploys a function with no code, so the test
//     checks each function holds the uploaded zip's bytes.
//   - Nothing runs. moto does not run the functions here: on each table
//     write it would invoke EventsFunction in Docker, unfiltered, with no
//     batching, retries or on-failure queue (without Docker the write just
//     succeeds), so this test writes nothing. IAM policies are stored (an
//     inline policy as a Python repr, not JSON) and never evaluated; log
//     groups are made with their retention, unchecked here; alarms never
//     fire; the SNS subscription mails nobody.
func TestTemplateDeploysInMoto(t *testing.T) {
	models := []struct{ name, stack, params string }{
		{"jwt authorizer", "onceupload-jwt", `{"JwtIssuer": "https://issuer.example.com/", "JwtAudience": "client-id", "AlarmEmail": "ops@example.com", "Tracing": "Active", "KmsKeyArn": "` + testKey + `"}`},
		{"anonymous", "onceupload-anonymous", `{"AllowAnonymous": "true"}`},
	}
	// The transforms run while moto starts.
	transforms := make([]func(*testing.T) []byte, len(models))
	for i, m := range models {
		transforms[i] = transformJSON(m.params)
	}
	endpoint := testenv.Moto(t)
	templates := make([][]byte, len(models))
	for i := range models {
		templates[i] = transforms[i](t)
	}
	m := newMotoClients(endpoint)
	code := codeZip(t)
	codeBucket := testenv.NewBucket(t, m.s3)
	if _, err := m.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &codeBucket, Key: aws.String("code.zip"), Body: bytes.NewReader(code)}); err != nil {
		t.Fatal(err)
	}
	for i, model := range models {
		t.Run(model.name, func(t *testing.T) {
			var params map[string]string
			if err := json.Unmarshal([]byte(model.params), &params); err != nil {
				t.Fatal(err)
			}
			body := forMoto(t, templates[i], codeBucket, "code.zip")
			var c cfn
			if err := json.Unmarshal(body, &c); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d := m.deploy(t, model.stack, body, params)
			t.Logf("stack %s: CREATE_COMPLETE in %v", model.stack, time.Since(start).Round(time.Millisecond))
			d.c, d.params, d.code = c, params, code
			d.checkResources()
			d.checkTable()
			d.checkQueues()
			d.checkFunctions()
			d.checkStreamMapping()
			d.checkBucket()
			d.checkAlarms()
			d.checkOutputs()
			for _, s := range d.dropped {
				t.Logf("dropped by moto: %s", s)
			}
		})
	}
}

// transformJSON starts transform's command and returns a function that
// waits for it and returns the whole template, or skips or fails t as
// transform does.
func transformJSON(params string) func(*testing.T) []byte {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := exec.Command("python3", "testdata/transform.py", "../../../template.yaml", params).Output()
		done <- result{out, err}
	}()
	return func(t *testing.T) []byte {
		t.Helper()
		r := <-done
		return transformed(t)(r.out, r.err)
	}
}

// codeZip is a function package holding a bootstrap that only fails: moto
// wants code it can find, and never runs it here.
func codeZip(t *testing.T) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := w.CreateHeader(h)
	if err == nil {
		_, err = f.Write([]byte("#!/bin/sh\necho 'placeholder: build the functions with sam build' >&2\nexit 1\n"))
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// forMoto sets every function's Code to the object bucket/key, and wraps
// each environment variable that is a Number parameter in a Fn::Join:
// moto resolves such a Ref to a number, which then reaches the function's
// environment as a JSON number that the SDK refuses to read (real
// CloudFormation passes a string).
func forMoto(t *testing.T, template []byte, bucket, key string) []byte {
	t.Helper()
	var tpl map[string]any
	if err := json.Unmarshal(template, &tpl); err != nil {
		t.Fatal(err)
	}
	params, _ := tpl["Parameters"].(map[string]any)
	n := 0
	for _, r := range tpl["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] != "AWS::Lambda::Function" {
			continue
		}
		p := r["Properties"].(map[string]any)
		p["Code"] = map[string]any{"S3Bucket": bucket, "S3Key": key}
		n++
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for k, v := range vars {
			m, _ := v.(map[string]any)
			ref, _ := m["Ref"].(string)
			if param, ok := params[ref].(map[string]any); ok && param["Type"] == "Number" {
				vars[k] = map[string]any{"Fn::Join": []any{"", []any{v}}}
			}
		}
	}
	if n == 0 {
		t.Fatal("the transformed template has no AWS::Lambda::Function")
	}
	out, err := json.Marshal(tpl)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type motoClients struct {
	cf  *cloudformation.Client
	ddb *dynamodb.Client
	lam *lambda.Client
	s3  *s3.Client
	sns *sns.Client
	sqs *sqs.Client
}

func newMotoClients(endpoint string) motoClients {
	cfg := testenv.AWSConfig()
	return motoClients{
		cf:  cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) { o.BaseEndpoint = &endpoint }),
		ddb: testenv.DynamoClient(endpoint, nil),
		lam: lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = &endpoint }),
		s3:  testenv.S3Client(endpoint, nil),
		sns: sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = &endpoint }),
		sqs: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = &endpoint }),
	}
}

// deployed is one stack as moto made it.
type deployed struct {
	motoClients
	t         *testing.T
	ctx       context.Context
	c         cfn               // the template deployed
	params    map[string]string // its parameters
	code      []byte            // the functions' package
	stack     cftypes.Stack
	physical  map[string]string // logical id -> physical id
	account   string
	queueArn  map[string]string // logical id -> ARN
	streamArn string            // the table's latest stream, as checkTable found it
	dropped   []string
}

// deploy creates the stack and waits for CREATE_COMPLETE.
func (m motoClients) deploy(t *testing.T, name string, body []byte, params map[string]string) *deployed {
	t.Helper()
	ctx := context.Background()
	in := &cloudformation.CreateStackInput{
		StackName:    &name,
		TemplateBody: aws.String(string(body)),
		Capabilities: []cftypes.Capability{cftypes.CapabilityCapabilityIam},
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		in.Parameters = append(in.Parameters, cftypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(params[k])})
	}
	if _, err := m.cf.CreateStack(ctx, in); err != nil {
		t.Fatalf("create stack: %v", err)
	}
	waiter := cloudformation.NewStackCreateCompleteWaiter(m.cf, func(o *cloudformation.StackCreateCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &cloudformation.DescribeStacksInput{StackName: &name}, 20*time.Second)
	if err != nil {
		events, _ := m.cf.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: &name})
		var failed []string
		if events != nil {
			for _, e := range events.StackEvents {
				if strings.HasSuffix(string(e.ResourceStatus), "FAILED") {
					failed = append(failed, fmt.Sprintf("%s %s: %s", aws.ToString(e.LogicalResourceId), e.ResourceStatus, aws.ToString(e.ResourceStatusReason)))
				}
			}
		}
		t.Fatalf("stack %s not created: %v\n%s", name, err, strings.Join(failed, "\n"))
	}
	d := &deployed{motoClients: m, t: t, ctx: ctx, stack: out.Stacks[0], physical: map[string]string{}, queueArn: map[string]string{}}
	// arn:aws:cloudformation:REGION:ACCOUNT:stack/NAME/ID
	if parts := strings.Split(aws.ToString(d.stack.StackId), ":"); len(parts) > 4 {
		d.account = parts[4]
	}
	res, err := m.cf.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: &name})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.StackResources {
		if r.LogicalResourceId == nil { // a type moto does not implement
			continue
		}
		if r.ResourceStatus != cftypes.ResourceStatusCreateComplete {
			t.Errorf("%s is %s: %s", *r.LogicalResourceId, r.ResourceStatus, aws.ToString(r.ResourceStatusReason))
		}
		d.physical[*r.LogicalResourceId] = aws.ToString(r.PhysicalResourceId)
	}
	return d
}

func (d *deployed) drop(format string, args ...any) {
	d.dropped = append(d.dropped, fmt.Sprintf(format, args...))
}

// id returns the physical id of a resource the stack must have made.
func (d *deployed) id(logical string) string {
	d.t.Helper()
	p := d.physical[logical]
	if p == "" {
		d.t.Fatalf("moto made no %s", logical)
	}
	return p
}

// expected says whether the stack should hold a resource: its condition
// (the template's only one is HasAlarmEmail) holds.
func (d *deployed) expected(r resource) bool {
	switch r.Condition {
	case "":
		return true
	case "HasAlarmEmail":
		return d.params["AlarmEmail"] != ""
	}
	d.t.Fatalf("condition %s: teach deploy_test.go what decides it", r.Condition)
	return false
}

// Every resource the template makes is in the stack, but for the types moto
// does not implement.
func (d *deployed) checkResources() {
	for _, id := range slices.Sorted(maps.Keys(d.c.Resources)) {
		r := d.c.Resources[id]
		_, made := d.physical[id]
		switch {
		case !d.expected(r):
			if made {
				d.t.Errorf("%s was made though its condition %s is false", id, r.Condition)
			}
		case motoLacks[r.Type]:
			if made {
				d.t.Logf("moto now implements %s (%s): update motoLacks and the test's doc", r.Type, id)
			} else {
				d.drop("%s (%s): not implemented", id, r.Type)
			}
		case !made:
			d.t.Errorf("%s (%s) is not in the stack", id, r.Type)
		}
	}
}

type keyElem struct{ AttributeName, KeyType string }

func keyString(ks []keyElem) string {
	var s []string
	for _, k := range ks {
		s = append(s, k.AttributeName+" "+k.KeyType)
	}
	return strings.Join(s, ", ")
}

func ddbKeyString(ks []ddbtypes.KeySchemaElement) string {
	var s []keyElem
	for _, k := range ks {
		s = append(s, keyElem{aws.ToString(k.AttributeName), string(k.KeyType)})
	}
	return keyString(s)
}

// The table has the template's key, billing, stream and index.
func (d *deployed) checkTable() {
	var want struct {
		BillingMode            string
		KeySchema              []keyElem
		GlobalSecondaryIndexes []struct {
			IndexName  string
			KeySchema  []keyElem
			Projection struct{ ProjectionType string }
		}
		StreamSpecification     struct{ StreamViewType string }
		TimeToLiveSpecification struct {
			AttributeName string
			Enabled       bool
		}
		PointInTimeRecoverySpecification struct{ PointInTimeRecoveryEnabled bool }
		SSESpecification                 struct{ SSEEnabled bool }
	}
	if err := json.Unmarshal(d.c.Resources["IdempotencyTable"].Properties, &want); err != nil {
		d.t.Fatal(err)
	}
	name := d.id("IdempotencyTable")
	out, err := d.ddb.DescribeTable(d.ctx, &dynamodb.DescribeTableInput{TableName: &name})
	if err != nil {
		d.t.Fatal(err)
	}
	tbl := out.Table
	d.streamArn = aws.ToString(tbl.LatestStreamArn)
	if got := ddbKeyString(tbl.KeySchema); got != keyString(want.KeySchema) {
		d.t.Errorf("table key %s, want %s", got, keyString(want.KeySchema))
	}
	if tbl.BillingModeSummary == nil || string(tbl.BillingModeSummary.BillingMode) != want.BillingMode {
		d.t.Errorf("table billing %+v, want %s", tbl.BillingModeSummary, want.BillingMode)
	}
	if s := tbl.StreamSpecification; s == nil || !aws.ToBool(s.StreamEnabled) || string(s.StreamViewType) != want.StreamSpecification.StreamViewType || aws.ToString(tbl.LatestStreamArn) == "" {
		d.t.Errorf("table stream %+v (%s), want %s", s, aws.ToString(tbl.LatestStreamArn), want.StreamSpecification.StreamViewType)
	}
	if len(tbl.GlobalSecondaryIndexes) != len(want.GlobalSecondaryIndexes) {
		d.t.Errorf("table has %d global secondary indexes, want %d", len(tbl.GlobalSecondaryIndexes), len(want.GlobalSecondaryIndexes))
	}
	for _, w := range want.GlobalSecondaryIndexes {
		i := slices.IndexFunc(tbl.GlobalSecondaryIndexes, func(g ddbtypes.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(g.IndexName) == w.IndexName
		})
		if i < 0 {
			d.t.Errorf("table has no index %s", w.IndexName)
			continue
		}
		g := tbl.GlobalSecondaryIndexes[i]
		if got := ddbKeyString(g.KeySchema); got != keyString(w.KeySchema) {
			d.t.Errorf("index %s key %s, want %s", w.IndexName, got, keyString(w.KeySchema))
		}
		if g.Projection == nil || string(g.Projection.ProjectionType) != w.Projection.ProjectionType {
			d.t.Errorf("index %s projection %+v, want %s", w.IndexName, g.Projection, w.Projection.ProjectionType)
		}
		if g.IndexStatus != ddbtypes.IndexStatusActive {
			d.t.Errorf("index %s is %s", w.IndexName, g.IndexStatus)
		}
	}
	ttl, err := d.ddb.DescribeTimeToLive(d.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		d.t.Fatal(err)
	}
	if want.TimeToLiveSpecification.Enabled && (ttl.TimeToLiveDescription == nil || ttl.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled) {
		d.drop("IdempotencyTable TimeToLiveSpecification on %s", want.TimeToLiveSpecification.AttributeName)
	}
	backups, err := d.ddb.DescribeContinuousBackups(d.ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: &name})
	if err != nil {
		d.t.Fatal(err)
	}
	if want.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled {
		if b := backups.ContinuousBackupsDescription; b == nil || b.PointInTimeRecoveryDescription == nil || b.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus != ddbtypes.PointInTimeRecoveryStatusEnabled {
			d.drop("IdempotencyTable PointInTimeRecoverySpecification")
		}
	}
	if want.SSESpecification.SSEEnabled && tbl.SSEDescription == nil {
		d.drop("IdempotencyTable SSESpecification")
	}
}

// The failure queues exist with the template's retention and encryption.
func (d *deployed) checkQueues() {
	for _, id := range []string{"FinalizeFailureQueue", "EventsFailureQueue"} {
		var want struct {
			MessageRetentionPeriod int
			SqsManagedSseEnabled   bool
		}
		if err := json.Unmarshal(d.c.Resources[id].Properties, &want); err != nil {
			d.t.Fatal(err)
		}
		out, err := d.sqs.GetQueueAttributes(d.ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(d.id(id)), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			d.t.Fatalf("%s: %v", id, err)
		}
		a := out.Attributes
		if a["MessageRetentionPeriod"] != fmt.Sprint(want.MessageRetentionPeriod) {
			d.t.Errorf("%s retains messages %s s, want %d", id, a["MessageRetentionPeriod"], want.MessageRetentionPeriod)
		}
		if a["SqsManagedSseEnabled"] != fmt.Sprint(want.SqsManagedSseEnabled) {
			d.t.Errorf("%s SqsManagedSseEnabled %q, want %v", id, a["SqsManagedSseEnabled"], want.SqsManagedSseEnabled)
		}
		d.queueArn[id] = a["QueueArn"]
	}
}

// The three functions exist with the uploaded code, their roles, limits and
// environment.
func (d *deployed) checkFunctions() {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(d.c.Resources)) {
		if d.c.Resources[id].Type == "AWS::Lambda::Function" {
			ids = append(ids, id)
		}
	}
	if want := []string{"EventsFunction", "FinalizeFunction", "PresignFunction"}; !slices.Equal(ids, want) {
		d.t.Errorf("functions %v, want %v", ids, want)
	}
	sum := sha256.Sum256(d.code)
	for _, id := range ids {
		var want struct {
			Runtime, Handler    string
			Timeout, MemorySize int32
			Architectures       []string
			TracingConfig       struct{ Mode any }
			LoggingConfig       map[string]any
			Role                struct {
				GetAtt []string `json:"Fn::GetAtt"`
			}
			Environment struct{ Variables map[string]any }
		}
		if err := json.Unmarshal(d.c.Resources[id].Properties, &want); err != nil {
			d.t.Fatal(err)
		}
		out, err := d.lam.GetFunction(d.ctx, &lambda.GetFunctionInput{FunctionName: aws.String(d.id(id))})
		if err != nil {
			d.t.Errorf("%s: %v", id, err)
			continue
		}
		f := out.Configuration
		if string(f.Runtime) != want.Runtime || aws.ToString(f.Handler) != want.Handler || aws.ToInt32(f.Timeout) != want.Timeout || aws.ToInt32(f.MemorySize) != want.MemorySize {
			d.t.Errorf("%s: runtime %s handler %s timeout %d memory %d, want %s %s %d %d", id,
				f.Runtime, aws.ToString(f.Handler), aws.ToInt32(f.Timeout), aws.ToInt32(f.MemorySize),
				want.Runtime, want.Handler, want.Timeout, want.MemorySize)
		}
		if len(want.Role.GetAtt) != 2 || !strings.HasSuffix(aws.ToString(f.Role), ":role/"+d.id(want.Role.GetAtt[0])) {
			d.t.Errorf("%s runs as %s, want the role %v", id, aws.ToString(f.Role), want.Role.GetAtt)
		}
		if f.CodeSize != int64(len(d.code)) || aws.ToString(f.CodeSha256) != base64.StdEncoding.EncodeToString(sum[:]) {
			d.t.Errorf("%s holds %d bytes (%s), not the uploaded package", id, f.CodeSize, aws.ToString(f.CodeSha256))
		}
		var env map[string]string
		if f.Environment != nil {
			env = f.Environment.Variables
		}
		if got, want := slices.Sorted(maps.Keys(env)), slices.Sorted(maps.Keys(want.Environment.Variables)); !slices.Equal(got, want) {
			d.t.Errorf("%s environment %v, want %v", id, got, want)
		}
		if env["TABLE_NAME"] != d.id("IdempotencyTable") {
			d.t.Errorf("%s TABLE_NAME %q, want the table %s", id, env["TABLE_NAME"], d.id("IdempotencyTable"))
		}
		if env["BUCKET_NAME"] != d.id("UploadBucket") {
			d.t.Errorf("%s BUCKET_NAME %q, want the bucket the stack made, %s", id, env["BUCKET_NAME"], d.id("UploadBucket"))
		}
		var arch []string
		for _, a := range f.Architectures {
			arch = append(arch, string(a))
		}
		if !slices.Equal(arch, want.Architectures) {
			d.drop("%s Architectures %v: moto says %v", id, want.Architectures, arch)
		}
		wantTracing := d.params["Tracing"]
		if wantTracing == "" {
			wantTracing = "PassThrough"
		}
		if f.TracingConfig == nil || string(f.TracingConfig.Mode) != wantTracing {
			d.drop("%s TracingConfig %s", id, wantTracing)
		}
		if want.LoggingConfig != nil && f.LoggingConfig == nil {
			d.drop("%s LoggingConfig", id)
		}
	}
	d.checkPermissions()
}

type lambdaPolicy struct {
	Statement []struct {
		Principal struct{ Service string }
		Condition map[string]map[string]string
	}
}

// S3 may invoke finalize for the stack's bucket in this account only; API
// Gateway may invoke presign once per route.
func (d *deployed) checkPermissions() {
	policy := func(fn string) lambdaPolicy {
		out, err := d.lam.GetPolicy(d.ctx, &lambda.GetPolicyInput{FunctionName: aws.String(d.id(fn))})
		if err != nil {
			d.t.Fatalf("%s policy: %v", fn, err)
		}
		var p lambdaPolicy
		if err := json.Unmarshal([]byte(aws.ToString(out.Policy)), &p); err != nil {
			d.t.Fatalf("%s policy: %v", fn, err)
		}
		return p
	}
	fin := policy("FinalizeFunction")
	bucketArn := "arn:aws:s3:::" + d.id("UploadBucket")
	if len(fin.Statement) != 1 || fin.Statement[0].Principal.Service != "s3.amazonaws.com" ||
		fin.Statement[0].Condition["ArnLike"]["AWS:SourceArn"] != bucketArn ||
		fin.Statement[0].Condition["StringEquals"]["AWS:SourceAccount"] != d.account {
		d.t.Errorf("finalize's policy %+v, want one statement letting s3.amazonaws.com invoke it for %s in %s", fin, bucketArn, d.account)
	}
	routes := 0
	for id, r := range d.c.Resources {
		if r.Type == "AWS::Lambda::Permission" && strings.HasPrefix(id, "PresignFunction") {
			routes++
		}
	}
	pre := policy("PresignFunction")
	n := 0
	for _, s := range pre.Statement {
		if s.Principal.Service == "apigateway.amazonaws.com" {
			n++
		}
	}
	if n != routes || routes == 0 {
		d.t.Errorf("presign may be invoked by API Gateway in %d statements, want %d (one per route)", n, routes)
	}
}

// The events function reads the table's stream as the template says.
func (d *deployed) checkStreamMapping() {
	var want struct {
		BatchSize                      int32
		MaximumBatchingWindowInSeconds int32
		MaximumRetryAttempts           int32
		MaximumRecordAgeInSeconds      int32
		BisectBatchOnFunctionError     bool
		StartingPosition               string
		FunctionResponseTypes          []string
		FilterCriteria                 struct{ Filters []struct{ Pattern string } }
		DestinationConfig              struct {
			OnFailure struct {
				Destination struct {
					GetAtt []string `json:"Fn::GetAtt"`
				}
			}
		}
	}
	if err := json.Unmarshal(d.c.Resources["EventsFunctionTableStream"].Properties, &want); err != nil {
		d.t.Fatal(err)
	}
	fn := d.id("EventsFunction")
	out, err := d.lam.ListEventSourceMappings(d.ctx, &lambda.ListEventSourceMappingsInput{FunctionName: &fn})
	if err != nil {
		d.t.Fatal(err)
	}
	if len(out.EventSourceMappings) != 1 {
		d.t.Fatalf("the events function has %d event source mappings, want 1", len(out.EventSourceMappings))
	}
	m := out.EventSourceMappings[0]
	if got := aws.ToString(m.UUID); got != d.id("EventsFunctionTableStream") {
		d.t.Errorf("mapping %s is not the stack's %s", got, d.id("EventsFunctionTableStream"))
	}
	if got := aws.ToString(m.EventSourceArn); got != d.streamArn {
		d.t.Errorf("mapping reads %s, want the table's stream %s", got, d.streamArn)
	}
	if got := aws.ToString(m.State); got != "Enabled" {
		d.t.Errorf("mapping is %s", got)
	}
	wantDest := ""
	if g := want.DestinationConfig.OnFailure.Destination.GetAtt; len(g) == 2 {
		wantDest = d.queueArn[g[0]]
	}
	var dest string
	if m.DestinationConfig != nil && m.DestinationConfig.OnFailure != nil {
		dest = aws.ToString(m.DestinationConfig.OnFailure.Destination)
	}
	if dest != wantDest || wantDest == "" {
		d.t.Errorf("mapping's on-failure destination %q, want %q (%v)", dest, wantDest, want.DestinationConfig.OnFailure.Destination.GetAtt)
	}
	var patterns []string
	if m.FilterCriteria != nil {
		for _, f := range m.FilterCriteria.Filters {
			patterns = append(patterns, aws.ToString(f.Pattern))
		}
	}
	var wantPatterns []string
	for _, f := range want.FilterCriteria.Filters {
		wantPatterns = append(wantPatterns, f.Pattern)
	}
	if !slices.Equal(patterns, wantPatterns) || len(wantPatterns) == 0 {
		d.t.Errorf("mapping's filters %q, want %q", patterns, wantPatterns)
	}
	var types []string
	for _, r := range m.FunctionResponseTypes {
		types = append(types, string(r))
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"BatchSize", aws.ToInt32(m.BatchSize), want.BatchSize},
		{"MaximumBatchingWindowInSeconds", aws.ToInt32(m.MaximumBatchingWindowInSeconds), want.MaximumBatchingWindowInSeconds},
		{"MaximumRetryAttempts", aws.ToInt32(m.MaximumRetryAttempts), want.MaximumRetryAttempts},
		{"MaximumRecordAgeInSeconds", aws.ToInt32(m.MaximumRecordAgeInSeconds), want.MaximumRecordAgeInSeconds},
		{"BisectBatchOnFunctionError", aws.ToBool(m.BisectBatchOnFunctionError), want.BisectBatchOnFunctionError},
		{"StartingPosition", string(m.StartingPosition), want.StartingPosition},
		{"FunctionResponseTypes", strings.Join(types, ","), strings.Join(want.FunctionResponseTypes, ",")},
	} {
		if c.got != c.want {
			d.t.Errorf("mapping's %s is %v, want %v", c.name, c.got, c.want)
		}
	}
}

// The bucket exists, encrypted with KmsKeyArn's key or else SSE-S3; what
// else moto applied is reported.
func (d *deployed) checkBucket() {
	b := aws.String(d.id("UploadBucket"))
	if _, err := d.s3.HeadBucket(d.ctx, &s3.HeadBucketInput{Bucket: b}); err != nil {
		d.t.Fatalf("bucket %s: %v", *b, err)
	}
	enc, err := d.s3.GetBucketEncryption(d.ctx, &s3.GetBucketEncryptionInput{Bucket: b})
	if err != nil || enc.ServerSideEncryptionConfiguration == nil || len(enc.ServerSideEncryptionConfiguration.Rules) != 1 ||
		enc.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault == nil {
		d.t.Fatalf("bucket encryption: %+v %v", enc, err)
	}
	rule := enc.ServerSideEncryptionConfiguration.Rules[0]
	algorithm, key := "AES256", d.params["KmsKeyArn"]
	if key != "" {
		algorithm = "aws:kms"
	}
	if got := rule.ApplyServerSideEncryptionByDefault; string(got.SSEAlgorithm) != algorithm || aws.ToString(got.KMSMasterKeyID) != key {
		d.t.Errorf("bucket encryption %s with key %q, want %s with %q", got.SSEAlgorithm, aws.ToString(got.KMSMasterKeyID), algorithm, key)
	}
	if key != "" && !aws.ToBool(rule.BucketKeyEnabled) {
		d.drop("UploadBucket BucketKeyEnabled")
	}
	if n, err := d.s3.GetBucketNotificationConfiguration(d.ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: b}); err != nil || len(n.LambdaFunctionConfigurations) == 0 {
		d.drop("UploadBucket NotificationConfiguration (finalize's trigger)")
	}
	if _, err := d.s3.GetBucketCors(d.ctx, &s3.GetBucketCorsInput{Bucket: b}); err != nil {
		d.drop("UploadBucket CorsConfiguration")
	}
	if _, err := d.s3.GetBucketLifecycleConfiguration(d.ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b}); err != nil {
		d.drop("UploadBucket LifecycleConfiguration")
	}
	if _, err := d.s3.GetPublicAccessBlock(d.ctx, &s3.GetPublicAccessBlockInput{Bucket: b}); err != nil {
		d.drop("UploadBucket PublicAccessBlockConfiguration")
	}
	if _, err := d.s3.GetBucketOwnershipControls(d.ctx, &s3.GetBucketOwnershipControlsInput{Bucket: b}); err != nil {
		d.drop("UploadBucket OwnershipControls")
	}
}

// moto makes no alarms; each one's dimensions name resources that exist,
// and with AlarmEmail the topic they notify exists with its subscription.
func (d *deployed) checkAlarms() {
	n := 0
	for _, id := range slices.Sorted(maps.Keys(d.c.Resources)) {
		r := d.c.Resources[id]
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		n++
		var p struct {
			Dimensions []struct{ Value any }
			Metrics    []struct {
				MetricStat struct {
					Metric struct{ Dimensions []struct{ Value any } }
				}
			}
		}
		if err := json.Unmarshal(r.Properties, &p); err != nil {
			d.t.Fatal(err)
		}
		dims := p.Dimensions
		for _, m := range p.Metrics {
			dims = append(dims, m.MetricStat.Metric.Dimensions...)
		}
		for _, dim := range dims {
			d.checkDimension(id, dim.Value)
		}
	}
	if n == 0 {
		d.t.Error("the template has no alarms")
	}
	email := d.params["AlarmEmail"]
	if email == "" {
		return
	}
	topic := aws.String(d.id("AlarmTopic"))
	attrs, err := d.sns.GetTopicAttributes(d.ctx, &sns.GetTopicAttributesInput{TopicArn: topic})
	if err != nil {
		d.t.Fatalf("alarm topic: %v", err)
	}
	var want struct{ KmsMasterKeyId string }
	if err := json.Unmarshal(d.c.Resources["AlarmTopic"].Properties, &want); err != nil {
		d.t.Fatal(err)
	}
	if got := attrs.Attributes["KmsMasterKeyId"]; got != want.KmsMasterKeyId {
		d.t.Errorf("alarm topic's key %q, want %q", got, want.KmsMasterKeyId)
	}
	subs, err := d.sns.ListSubscriptionsByTopic(d.ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: topic})
	if err != nil {
		d.t.Fatal(err)
	}
	if len(subs.Subscriptions) != 1 || aws.ToString(subs.Subscriptions[0].Protocol) != "email" || aws.ToString(subs.Subscriptions[0].Endpoint) != email {
		d.t.Errorf("alarm topic's subscriptions %+v, want one email to %s", subs.Subscriptions, email)
	}
}

// checkDimension checks that an alarm dimension's value, a literal, a
// function's name or a queue's name, names something moto has.
func (d *deployed) checkDimension(alarm string, v any) {
	switch v := v.(type) {
	case string:
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok {
			r, ok := d.c.Resources[ref]
			switch {
			case !ok: // a parameter
			case motoLacks[r.Type]:
			case r.Type == "AWS::Lambda::Function":
				if _, err := d.lam.GetFunction(d.ctx, &lambda.GetFunctionInput{FunctionName: aws.String(d.id(ref))}); err != nil {
					d.t.Errorf("alarm %s watches function %s: %v", alarm, ref, err)
				}
			default:
				d.t.Errorf("alarm %s: dimension on %s (%s): teach deploy_test.go to find it", alarm, ref, r.Type)
			}
			return
		}
		if g := asStrings(v["Fn::GetAtt"]); len(g) == 2 && g[1] == "QueueName" {
			url := d.id(g[0])
			name := url[strings.LastIndex(url, "/")+1:]
			if _, err := d.sqs.GetQueueUrl(d.ctx, &sqs.GetQueueUrlInput{QueueName: &name}); err != nil {
				d.t.Errorf("alarm %s watches queue %s (%s): %v", alarm, g[0], name, err)
			}
			return
		}
		d.t.Errorf("alarm %s: dimension value %v: teach deploy_test.go to resolve it", alarm, v)
	default:
		d.t.Errorf("alarm %s: dimension value %v", alarm, v)
	}
}

// The outputs name what the stack made.
func (d *deployed) checkOutputs() {
	got := map[string]string{}
	for _, o := range d.stack.Outputs {
		got[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	want := map[string]string{
		"BucketName":            d.id("UploadBucket"),
		"TableName":             d.id("IdempotencyTable"),
		"FailureQueueUrl":       d.id("FinalizeFailureQueue"),
		"EventsFailureQueueUrl": d.id("EventsFailureQueue"),
		"AccessLogGroup":        d.id("ApiAccessLogGroup"),
		"PresignFunctionName":   d.id("PresignFunction"),
		"FinalizeFunctionName":  d.id("FinalizeFunction"),
		"EventsFunctionName":    d.id("EventsFunction"),
	}
	if d.params["AlarmEmail"] != "" {
		want["AlarmTopicArn"] = d.id("AlarmTopic")
	} else if _, ok := got["AlarmTopicArn"]; ok {
		d.t.Errorf("output AlarmTopicArn without AlarmEmail")
	}
	for k, v := range want {
		if got[k] != v {
			d.t.Errorf("output %s = %q, want %q", k, got[k], v)
		}
	}
	if u := got["ApiUrl"]; !strings.HasPrefix(u, "https://") || strings.Contains(u, "${") {
		d.drop("output ApiUrl: %q (no HTTP API)", u)
	}
}
