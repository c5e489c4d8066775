// Package templatecheck proves template.yaml deploys as intended without an
// AWS account: it transforms the template with aws-sam-translator, as sam
// deploy would, for both access models, and checks the CloudFormation that
// comes out: alarms, API throttling and access logs, least-privilege roles,
// the scoped S3 invoke permission, the bucket policy, the bucket's
// encryption and KMS grants with and without KmsKeyArn, what outlives the
// stack, and that no resource depends on itself.
package templatecheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type resource struct {
	Type           string          `json:"Type"`
	Condition      string          `json:"Condition"`
	DeletionPolicy string          `json:"DeletionPolicy"`
	DependsOn      any             `json:"DependsOn"`
	Properties     json.RawMessage `json:"Properties"`
}

type cfn struct {
	Parameters map[string]struct{ Default any } `json:"Parameters"`
	Conditions map[string]any                   `json:"Conditions"`
	Resources  map[string]resource              `json:"Resources"`
	Outputs    map[string]any                   `json:"Outputs"`
}

// testKey is the KmsKeyArn of the model that sets one.
const testKey = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

func transform(t *testing.T, params string) cfn {
	t.Helper()
	out := transformed(t)(exec.Command("python3", "testdata/transform.py", "../../../template.yaml", params).Output())
	var c cfn
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// transformed returns a check of the transform's output: it skips the test
// when aws-sam-translator is missing (fails it under REQUIRE_INTEGRATION=1)
// and fails it on any other error.
func transformed(t *testing.T) func(out []byte, err error) []byte {
	return func(out []byte, err error) []byte {
		t.Helper()
		if err == nil {
			return out
		}
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		if strings.Contains(stderr, "No module named 'samtranslator'") || isNotFound(err) {
			if os.Getenv("REQUIRE_INTEGRATION") == "1" {
				t.Fatalf("aws-sam-translator is not installed: %v %s", err, stderr)
			}
			t.Skipf("aws-sam-translator is not installed: %v", err)
		}
		t.Fatalf("transform: %v\n%s", err, stderr)
		return nil
	}
}

func isNotFound(err error) bool {
	return strings.Contains(err.Error(), "executable file not found")
}

// props decodes a resource's properties into a generic value.
func props(t *testing.T, r resource) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(r.Properties, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTransformedTemplate(t *testing.T) {
	for name, params := range map[string]string{
		"jwt authorizer": `{"JwtIssuer": "https://issuer.example.com/", "JwtAudience": "client-id", "AlarmEmail": "ops@example.com", "Tracing": "Active", "KmsKeyArn": "` + testKey + `"}`,
		"anonymous":      `{"AllowAnonymous": "true"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := transform(t, params)
			var values map[string]string
			if err := json.Unmarshal([]byte(params), &values); err != nil {
				t.Fatal(err)
			}
			checkEncryption(t, c, values)
			checkAlarms(t, c)
			checkStage(t, c)
			checkRoles(t, c)
			checkS3Permission(t, c)
			checkRetained(t, c)
			checkBucketPolicy(t, c)
			checkNoCycles(t, c)
			checkGroupIndex(t, c)
			checkEventStream(t, c)
			for _, out := range []string{"ApiUrl", "BucketName", "TableName", "FailureQueueUrl", "AccessLogGroup", "AlarmTopicArn", "EventsFailureQueueUrl"} {
				if c.Outputs[out] == nil {
					t.Errorf("output %s is missing", out)
				}
			}
		})
	}
}

// Every failure an operator must hear of has an alarm on the right metric,
// and every alarm notifies the topic when one is configured.
func checkAlarms(t *testing.T, c cfn) {
	want := map[string]bool{
		"AWS/SQS ApproximateNumberOfMessagesVisible": false, "AWS/Lambda Errors PresignFunction": false,
		"AWS/Lambda Errors FinalizeFunction": false, "AWS/Lambda Throttles PresignFunction": false,
		"AWS/Lambda Throttles FinalizeFunction": false, "AWS/Lambda AsyncEventAge FinalizeFunction": false,
		"AWS/Lambda DestinationDeliveryFailures FinalizeFunction": false, "AWS/ApiGateway 5xx": false,
		"AWS/Lambda IteratorAge EventsFunction": false,
		"Requests Outcome=error":                false,
	}
	for id, r := range c.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := props(t, r)
		raw, _ := json.Marshal(p)
		if !strings.Contains(string(raw), `"AlarmActions":{"Fn::If":["HasAlarmEmail",[{"Ref":"AlarmTopic"}]`) {
			t.Errorf("alarm %s does not notify the alarm topic: %s", id, raw)
		}
		if p["AlarmDescription"] == "" || p["AlarmDescription"] == nil {
			t.Errorf("alarm %s does not say what to do", id)
		}
		ns, _ := p["Namespace"].(string)
		metric, _ := p["MetricName"].(string)
		fn := ""
		if dims, ok := p["Dimensions"].([]any); ok && len(dims) > 0 {
			if v, ok := dims[0].(map[string]any)["Value"].(map[string]any); ok {
				fn, _ = v["Ref"].(string)
			}
		}
		switch {
		case strings.Contains(string(raw), `"MetricName":"5xx"`):
			want["AWS/ApiGateway 5xx"] = true
		case metric == "Requests" && strings.Contains(string(raw), `"Value":"error"`):
			want["Requests Outcome=error"] = true
		case fn != "":
			want[ns+" "+metric+" "+fn] = true
		default:
			want[ns+" "+metric] = true
		}
	}
	for alarm, found := range want {
		if !found {
			t.Errorf("no alarm on %s", alarm)
		}
	}
}

// The API's stage throttles by default and writes JSON access logs.
func checkStage(t *testing.T, c cfn) {
	for id, r := range c.Resources {
		if r.Type != "AWS::ApiGatewayV2::Stage" {
			continue
		}
		p := props(t, r)
		raw, _ := json.Marshal(p["DefaultRouteSettings"])
		if !strings.Contains(string(raw), `"ThrottlingRateLimit":{"Ref":"ApiThrottlingRateLimit"}`) || !strings.Contains(string(raw), `"ThrottlingBurstLimit":{"Ref":"ApiThrottlingBurstLimit"}`) {
			t.Errorf("stage %s throttling: %s", id, raw)
		}
		logs, _ := p["AccessLogSettings"].(map[string]any)
		var format map[string]string
		if f, _ := logs["Format"].(string); json.Unmarshal([]byte(f), &format) != nil || format["status"] == "" {
			t.Errorf("stage %s access log format is not JSON with the status: %v", id, logs["Format"])
		}
		return
	}
	t.Error("no API stage")
}

// Each function's role is its own and grants only what its code calls: its
// log group (not logs:* on *), no managed policy, no action it never calls.
// streamActions are what reading a table's stream takes, besides
// dynamodb:ListStreams, which authorizes on "*" alone.
var streamActions = map[string]bool{"dynamodb:DescribeStream": true, "dynamodb:GetRecords": true, "dynamodb:GetShardIterator": true}

func checkRoles(t *testing.T, c cfn) {
	want := map[string][]string{
		"PresignRole": {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem",
			"kms:Decrypt", "kms:GenerateDataKey", "logs:CreateLogStream", "logs:PutLogEvents", "s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:ListBucket",
			"s3:ListMultipartUploadParts", "s3:PutObject", "xray:PutTelemetryRecords", "xray:PutTraceSegments"},
		"FinalizeRole": {"dynamodb:GetItem", "dynamodb:UpdateItem", "kms:Decrypt", "logs:CreateLogStream", "logs:PutLogEvents",
			"s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "sqs:SendMessage", "xray:PutTelemetryRecords", "xray:PutTraceSegments"},
		"EventsRole": {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
			"events:PutEvents", "logs:CreateLogStream", "logs:PutLogEvents", "sqs:SendMessage", "xray:PutTelemetryRecords", "xray:PutTraceSegments"},
	}
	for id, r := range c.Resources {
		if r.Type != "AWS::IAM::Role" {
			continue
		}
		p := props(t, r)
		if p["ManagedPolicyArns"] != nil {
			t.Errorf("role %s has managed policies %v (AWSLambdaBasicExecutionRole grants logs:* on *)", id, p["ManagedPolicyArns"])
		}
		var actions []string
		raw, _ := json.Marshal(p["Policies"])
		var policies []struct {
			PolicyDocument struct {
				Statement []json.RawMessage
			}
		}
		_ = json.Unmarshal(raw, &policies)
		for _, pol := range policies {
			for _, st := range pol.PolicyDocument.Statement {
				var s struct {
					Action   any
					Resource any
					FnIf     []json.RawMessage `json:"Fn::If"`
				}
				_ = json.Unmarshal(st, &s)
				if len(s.FnIf) == 3 { // a statement only under a condition
					_ = json.Unmarshal(s.FnIf[1], &s)
				}
				for _, a := range asStrings(s.Action) {
					actions = append(actions, a)
					if strings.HasPrefix(a, "logs:") && !strings.Contains(mustJSON(s.Resource), "LogGroup.Arn") {
						t.Errorf("role %s: %s on %s, not on its own log group", id, a, mustJSON(s.Resource))
					}
					if a == "*" || strings.HasSuffix(a, ":*") {
						t.Errorf("role %s: wildcard action %s", id, a)
					}
					if res := mustJSON(s.Resource); a == "dynamodb:ListStreams" && res != `"*"` {
						t.Errorf("role %s: %s on %s: it authorizes on \"*\" alone, so on anything else it grants nothing", id, a, res)
					}
					if res := mustJSON(s.Resource); strings.HasPrefix(a, "dynamodb:") && a != "dynamodb:ListStreams" && streamActions[a] != strings.Contains(res, "/stream/*") {
						t.Errorf("role %s: %s on %s: stream actions belong on the table's stream alone, item actions on the table", id, a, res)
					}
					if res := mustJSON(s.Resource); a == "dynamodb:Query" && !strings.Contains(res, "${IdempotencyTable.Arn}/index/by_group") {
						t.Errorf("role %s: %s on %s, not on the group index alone", id, a, res)
					}
				}
			}
		}
		slices.Sort(actions)
		if w, ok := want[id]; ok && !slices.Equal(actions, w) {
			t.Errorf("role %s actions:\n got %v\nwant %v", id, actions, w)
		}
		delete(want, id)
	}
	for id := range want {
		t.Errorf("no role %s", id)
	}
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// S3 may invoke finalize only from this stack's bucket, in this account.
func checkS3Permission(t *testing.T, c cfn) {
	found := false
	for id, r := range c.Resources {
		if r.Type != "AWS::Lambda::Permission" {
			continue
		}
		p := props(t, r)
		if p["Principal"] != "s3.amazonaws.com" {
			continue
		}
		found = true
		arn := mustJSON(p["SourceArn"])
		if !strings.Contains(arn, "arn:${AWS::Partition}:s3:::onceupload-") || p["SourceAccount"] == nil {
			t.Errorf("permission %s lets any bucket invoke finalize: SourceArn %s SourceAccount %v", id, arn, p["SourceAccount"])
		}
	}
	if !found {
		t.Error("no permission for S3 to invoke finalize")
	}
}

// The bucket outlives the stack, and so does its policy (TLS only, written
// once).
func checkRetained(t *testing.T, c cfn) {
	for _, id := range []string{"UploadBucket", "UploadBucketPolicy"} {
		if r := c.Resources[id]; r.DeletionPolicy != "Retain" {
			t.Errorf("%s DeletionPolicy %q, want Retain", id, r.DeletionPolicy)
		}
	}
}

// The bucket's policy is exactly its two denials: any request without TLS,
// and a write under the upload prefix without If-None-Match. No local S3
// evaluates a bucket policy (and moto drops it), so this is the only check
// before AWS of the second one's exemption, on which every multipart upload
// depends: CreateMultipartUpload, UploadPart and UploadPartCopy cannot send
// If-None-Match, and S3 sets s3:ObjectCreationOperation to false for them.
func checkBucketPolicy(t *testing.T, c cfn) {
	var p struct {
		Bucket         any
		PolicyDocument struct {
			Version   string
			Statement []any
		}
	}
	if err := json.Unmarshal(c.Resources["UploadBucketPolicy"].Properties, &p); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(p.Bucket); got != `{"Ref":"UploadBucket"}` || p.PolicyDocument.Version != "2012-10-17" {
		t.Errorf("bucket policy on %s, version %q", got, p.PolicyDocument.Version)
	}
	want := []string{
		`{"Action":"s3:*","Condition":{"Bool":{"aws:SecureTransport":"false"}},"Effect":"Deny","Principal":"*",` +
			`"Resource":[{"Fn::GetAtt":["UploadBucket","Arn"]},{"Fn::Sub":"${UploadBucket.Arn}/*"}],"Sid":"DenyInsecureTransport"}`,
		`{"Action":"s3:PutObject","Condition":{"Bool":{"s3:ObjectCreationOperation":"true"},"Null":{"s3:if-none-match":"true"}},` +
			`"Effect":"Deny","Principal":"*","Resource":{"Fn::Sub":"${UploadBucket.Arn}/${UploadPrefix}*"},"Sid":"DenyUnconditionalWrites"}`,
	}
	var got []string
	for _, st := range p.PolicyDocument.Statement {
		got = append(got, mustJSON(st))
	}
	if !slices.Equal(got, want) {
		t.Errorf("bucket policy statements:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// kmsNeeds is what each function does with S3 under SSE-KMS, and the KMS
// action S3 then calls as the caller (AWS's API reference of each
// operation): storing bytes takes a data key, and reading them back, their
// list, or an object's checksum takes Decrypt. presign signs the URLs that
// PutObject and UploadPart run with, so they are its calls; abort and
// delete need no KMS action. Finalize's HeadObject asks for checksums
// (ChecksumMode ENABLED), which is what needs Decrypt.
var kmsNeeds = map[string]map[string][]string{
	"PresignRole": {
		"PutObject (a URL)": {"kms:GenerateDataKey"}, "UploadPart (a URL)": {"kms:GenerateDataKey"},
		"CreateMultipartUpload": {"kms:GenerateDataKey", "kms:Decrypt"}, "CompleteMultipartUpload": {"kms:Decrypt"},
		"ListParts": {"kms:Decrypt"}, "HeadObject with checksums": {"kms:Decrypt"},
	},
	"FinalizeRole": {"HeadObject with checksums": {"kms:Decrypt"}},
	"EventsRole":   {},
}

// With KmsKeyArn the bucket encrypts with that key by default, through a
// Bucket Key, and each role may use the key for what its function asks of
// S3 (kmsNeeds), only through S3; without it the bucket is SSE-S3 and no
// role names KMS. Either way no URL signs an encryption header, so the
// bucket's CORS headers stay as they are.
func checkEncryption(t *testing.T, c cfn, params map[string]string) {
	key := params["KmsKeyArn"]
	bucket := c.effective(t, params, props(t, c.Resources["UploadBucket"])).(map[string]any)
	want := `{"ServerSideEncryptionConfiguration":[{"ServerSideEncryptionByDefault":{"SSEAlgorithm":"AES256"}}]}`
	if key != "" {
		want = `{"ServerSideEncryptionConfiguration":[{"BucketKeyEnabled":true,"ServerSideEncryptionByDefault":{"KMSMasterKeyID":{"Ref":"KmsKeyArn"},"SSEAlgorithm":"aws:kms"}}]}`
	}
	if got := mustJSON(bucket["BucketEncryption"]); got != want {
		t.Errorf("KmsKeyArn %q: bucket encryption\n got %s\nwant %s", key, got, want)
	}
	if cors := mustJSON(bucket["CorsConfiguration"]); strings.Contains(strings.ToLower(cors), "server-side-encryption") {
		t.Errorf("bucket CORS allows an encryption header: %s", cors)
	}
	const viaS3 = `{"StringEquals":{"kms:ViaService":{"Fn::Sub":"s3.${AWS::Region}.amazonaws.com"}}}`
	for role, needs := range kmsNeeds {
		granted := map[string]bool{}
		policies := c.effective(t, params, props(t, c.Resources[role])["Policies"])
		for _, pol := range policies.([]any) {
			doc := pol.(map[string]any)["PolicyDocument"].(map[string]any)
			for _, st := range doc["Statement"].([]any) {
				st := st.(map[string]any)
				if !strings.Contains(mustJSON(st["Action"]), "kms:") {
					continue
				}
				if key == "" || mustJSON(st["Resource"]) != `{"Ref":"KmsKeyArn"}` || mustJSON(st["Condition"]) != viaS3 || st["Effect"] != "Allow" {
					t.Errorf("KmsKeyArn %q: %s grants KMS other than on the key through S3: %s", key, role, mustJSON(st))
					continue
				}
				for _, a := range statementActions(st["Action"]) {
					granted[a] = true
				}
			}
		}
		want := map[string]bool{}
		for op, actions := range needs {
			for _, a := range actions {
				if key != "" {
					want[a] = true
				}
				if key != "" && !granted[a] {
					t.Errorf("KmsKeyArn %q: %s cannot %s: S3 asks KMS for %s as the caller", key, role, op, a)
				}
			}
		}
		for a := range granted {
			if !want[a] {
				t.Errorf("KmsKeyArn %q: %s is granted %s, which none of its S3 calls needs", key, role, a)
			}
		}
	}
}

// statementActions is a statement's Action as a list: one string, or several.
func statementActions(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, a := range v.([]any) {
		out = append(out, a.(string))
	}
	return out
}

// effective returns v as CloudFormation deploys it with params: each Fn::If
// reduced to the branch its condition chooses, AWS::NoValue removed.
func (c cfn) effective(t *testing.T, params map[string]string, v any) any {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if a, ok := v["Fn::If"].([]any); ok && len(v) == 1 && len(a) == 3 {
			name, _ := a[0].(string)
			if c.holds(t, params, map[string]any{"Condition": name}) {
				return c.effective(t, params, a[1])
			}
			return c.effective(t, params, a[2])
		}
		out := map[string]any{}
		for k, x := range v {
			if r := c.effective(t, params, x); !isNoValue(r) {
				out[k] = r
			}
		}
		return out
	case []any:
		out := []any{}
		for _, x := range v {
			if r := c.effective(t, params, x); !isNoValue(r) {
				out = append(out, r)
			}
		}
		return out
	}
	return v
}

func isNoValue(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 1 && m["Ref"] == "AWS::NoValue"
}

// holds evaluates a condition: the template's use Fn::Equals and Fn::Not on
// parameters (the value given, else the default).
func (c cfn) holds(t *testing.T, params map[string]string, cond any) bool {
	t.Helper()
	var value func(v any) any
	value = func(v any) any {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		a, _ := m["Fn::Equals"].([]any)
		n, _ := m["Fn::Not"].([]any)
		switch {
		case len(a) == 2:
			return fmt.Sprint(value(a[0])) == fmt.Sprint(value(a[1]))
		case len(n) == 1:
			b, ok := value(n[0]).(bool)
			return ok && !b
		case m["Condition"] != nil:
			name, _ := m["Condition"].(string)
			if _, ok := c.Conditions[name]; !ok {
				t.Fatalf("no condition %s", name)
			}
			return value(c.Conditions[name])
		case m["Ref"] != nil:
			name, _ := m["Ref"].(string)
			if p, ok := params[name]; ok {
				return p
			}
			if p, ok := c.Parameters[name]; ok {
				return fmt.Sprint(p.Default)
			}
		}
		t.Fatalf("condition %s: teach holds to evaluate it", mustJSON(v))
		return nil
	}
	b, ok := value(cond).(bool)
	if !ok {
		t.Fatalf("condition %s is not a boolean", mustJSON(cond))
	}
	return b
}

// The table has the sparse group index that counts a tenant's unfinished
// multipart uploads, keyed and projected as pkg/idempotency/recordstore's default
// Schema queries it, on demand like the table; the presign function gets
// its cap.
func checkGroupIndex(t *testing.T, c cfn) {
	var table struct {
		BillingMode            string
		AttributeDefinitions   []struct{ AttributeName, AttributeType string }
		GlobalSecondaryIndexes []struct {
			IndexName             string
			KeySchema             []struct{ AttributeName, KeyType string }
			Projection            struct{ ProjectionType string }
			ProvisionedThroughput any
		}
	}
	if err := json.Unmarshal(c.Resources["IdempotencyTable"].Properties, &table); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, d := range table.AttributeDefinitions {
		types[d.AttributeName] = d.AttributeType
	}
	if len(table.GlobalSecondaryIndexes) != 1 || table.BillingMode != "PAY_PER_REQUEST" {
		t.Fatalf("table: %d indexes, billing %s; want the group index, on demand", len(table.GlobalSecondaryIndexes), table.BillingMode)
	}
	ix := table.GlobalSecondaryIndexes[0]
	keys := fmt.Sprint(ix.KeySchema)
	if ix.IndexName != "by_group" || keys != "[{group HASH} {expires_at RANGE}]" || ix.Projection.ProjectionType != "KEYS_ONLY" ||
		types["group"] != "S" || types["expires_at"] != "N" || ix.ProvisionedThroughput != nil {
		t.Errorf("group index %s keys %s (group %s, expires_at %s), projection %s", ix.IndexName, keys, types["group"], types["expires_at"], ix.Projection.ProjectionType)
	}
	var fn struct {
		Environment struct{ Variables map[string]any }
	}
	if err := json.Unmarshal(c.Resources["PresignFunction"].Properties, &fn); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(fn.Environment.Variables["MAX_PENDING_MULTIPART_PER_TENANT"]); got != `{"Ref":"MaxPendingMultipartUploadsPerTenant"}` {
		t.Errorf("presign's MAX_PENDING_MULTIPART_PER_TENANT = %s", got)
	}
}

var subRef = regexp.MustCompile(`\$\{([A-Za-z0-9]+)(\.[A-Za-z0-9.]+)?\}`)

// checkNoCycles follows every Ref, GetAtt, Sub and DependsOn between
// resources: CloudFormation refuses a template where one leads back.
func checkNoCycles(t *testing.T, c cfn) {
	deps := map[string][]string{}
	for id, r := range c.Resources {
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					switch k {
					case "Ref":
						if s, ok := x.(string); ok {
							deps[id] = append(deps[id], s)
						}
					case "Fn::GetAtt":
						if a, ok := x.([]any); ok && len(a) > 0 {
							deps[id] = append(deps[id], a[0].(string))
						}
					case "Fn::Sub":
						s, _ := x.(string)
						if a, ok := x.([]any); ok && len(a) > 0 {
							s, _ = a[0].(string)
							walk(a[1:])
						}
						for _, m := range subRef.FindAllStringSubmatch(s, -1) {
							deps[id] = append(deps[id], m[1])
						}
					}
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		var p any
		_ = json.Unmarshal(r.Properties, &p)
		walk(p)
		deps[id] = append(deps[id], asStrings(r.DependsOn)...)
	}
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(id string, path []string)
	visit = func(id string, path []string) {
		if _, ok := c.Resources[id]; !ok || state[id] == 2 {
			return
		}
		if state[id] == 1 {
			t.Errorf("circular dependency: %s", strings.Join(append(path, id), " → "))
			return
		}
		state[id] = 1
		for _, d := range deps[id] {
			visit(d, append(path, id))
		}
		state[id] = 2
	}
	for id := range c.Resources {
		visit(id, nil)
	}
}

// The table's stream has one reader, the events function, whose retries
// are finite and end in the events failure queue, and whose filter passes
// final images only.
func checkEventStream(t *testing.T, c cfn) {
	var mappings []map[string]any
	for _, r := range c.Resources {
		if r.Type == "AWS::Lambda::EventSourceMapping" && strings.Contains(mustJSON(props(t, r)["EventSourceArn"]), "IdempotencyTable") {
			mappings = append(mappings, props(t, r))
		}
	}
	if len(mappings) != 1 {
		t.Fatalf("%d readers of the table's stream, want 1 (AWS advises at most two per shard)", len(mappings))
	}
	m := mappings[0]
	if got := mustJSON(m["FunctionName"]); !strings.Contains(got, "EventsFunction") {
		t.Errorf("stream reader %s, want EventsFunction", got)
	}
	if n, ok := m["MaximumRetryAttempts"].(float64); !ok || n < 0 || n > 10000 {
		t.Errorf("MaximumRetryAttempts %v: want a finite number (the default is unbounded)", m["MaximumRetryAttempts"])
	}
	if n, ok := m["MaximumRecordAgeInSeconds"].(float64); !ok || n < 60 || n > 86400 {
		t.Errorf("MaximumRecordAgeInSeconds %v: want a bound under the stream's 24 hours", m["MaximumRecordAgeInSeconds"])
	}
	if got := mustJSON(m["DestinationConfig"]); !strings.Contains(got, "EventsFailureQueue") {
		t.Errorf("on-failure destination %s, want EventsFailureQueue", got)
	}
	if got := asStrings(m["FunctionResponseTypes"]); !slices.Contains(got, "ReportBatchItemFailures") {
		t.Errorf("FunctionResponseTypes %v: the handler reports the first failed record", got)
	}
	var filters struct{ Filters []struct{ Pattern string } }
	raw, _ := json.Marshal(m["FilterCriteria"])
	_ = json.Unmarshal(raw, &filters)
	if len(filters.Filters) != 1 {
		t.Fatalf("filters %s, want one", raw)
	}
	var pattern struct {
		Dynamodb struct {
			NewImage struct {
				State struct{ S []string } `json:"state"`
			}
		} `json:"dynamodb"`
	}
	if err := json.Unmarshal([]byte(filters.Filters[0].Pattern), &pattern); err != nil {
		t.Fatalf("filter pattern %q: %v", filters.Filters[0].Pattern, err)
	}
	if got := pattern.Dynamodb.NewImage.State.S; !slices.Equal(got, []string{"completed", "aborted"}) {
		t.Errorf("filter passes new states %v, want completed and aborted", got)
	}
	table := props(t, c.Resources["IdempotencyTable"])
	if got := mustJSON(table["StreamSpecification"]); !strings.Contains(got, "NEW_AND_OLD_IMAGES") {
		t.Errorf("table stream %s, want NEW_AND_OLD_IMAGES", got)
	}
}

// KmsKeyArn takes a key's ARN or nothing: an alias would deploy a role
// statement on the alias, which grants no use of the key behind it, and
// every upload would then fail on AWS.
func TestKmsKeyArnPattern(t *testing.T) {
	raw, err := os.ReadFile("../../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Parameters map[string]struct {
			AllowedPattern string `yaml:"AllowedPattern"`
		} `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	re, err := regexp.Compile(tpl.Parameters["KmsKeyArn"].AllowedPattern)
	if err != nil || tpl.Parameters["KmsKeyArn"].AllowedPattern == "" {
		t.Fatalf("KmsKeyArn's AllowedPattern %q: %v", tpl.Parameters["KmsKeyArn"].AllowedPattern, err)
	}
	for value, want := range map[string]bool{
		"":      true,
		testKey: true,
		"arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/mrk-1234abcd12ab34cd56ef1234567890ab": true,
		"arn:aws:kms:us-east-1:123456789012:alias/uploads":                                       false,
		"1234abcd-12ab-34cd-56ef-1234567890ab":                                                   false,
		"alias/uploads":                                                                          false,
		testKey + " ":                                                                            false,
	} {
		if got := re.MatchString(value); got != want {
			t.Errorf("KmsKeyArn %q accepted %v, want %v", value, got, want)
		}
	}
}
