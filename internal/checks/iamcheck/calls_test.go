package iamcheck

import (
	"fmt"
	"strings"
	"testing"
)

// The kinds of caller a call is made by. Whoever makes it, AWS authorizes
// it as the role.
const (
	byFunction = "function"      // the function's code, through the SDK (op is the SDK operation)
	byURL      = "presigned URL" // a client, with a URL the role signed
	byLambda   = "Lambda"        // Lambda itself, with the function's role
	byS3       = "S3"            // S3 calling KMS as the request's signer
)

// A call is one request AWS authorizes as a role: the IAM action it checks,
// on what, with the context keys it sets.
type call struct {
	function string // logical id of the function whose role it is
	role     string // logical id of that role
	by       string
	op       string // what is called: the SDK operation for byFunction
	action   string
	resource string
	context  map[string]string
	// resourcePolicy names the resource's own policy that AWS evaluates
	// with the role's: "bucket" (UploadBucketPolicy), "key" (keyPolicy),
	// or none.
	resourcePolicy string
}

func (c call) String() string {
	return fmt.Sprintf("%s: %s %s (%s on %s)", c.role, c.by, c.op, c.action, c.resource)
}

// functionEnv is what a call needs to know of its function, read from the
// transformed template: its role, the table, bucket and prefix it is
// given, its log group, and whether tracing is on.
type functionEnv struct {
	role, session                    string
	table, bucket, prefix, eventBus  string
	logStream                        string
	tracing                          bool
	stream, streamDLQ, asyncDLQ, key string
}

// functions are the template's three functions (logical ids), each
// with what its calls are made on.
func (d *deployment) functions(t *testing.T) map[string]functionEnv {
	t.Helper()
	out := map[string]functionEnv{}
	for _, fn := range []string{"PresignFunction", "FinalizeFunction", "EventsFunction"} {
		role := ""
		roleArn := d.str(t, fn, "Role")
		for id, r := range d.cfn.Resources {
			if arn, _ := d.getAtt(id, "Arn"); r.Type == "AWS::IAM::Role" && arn == roleArn {
				role = id
			}
		}
		if role == "" {
			t.Fatalf("%s: %s's role %s is not one of the template's", d.name, fn, roleArn)
		}
		env := d.property(t, fn, "Environment", "Variables").(map[string]any)
		e := functionEnv{
			role:      role,
			session:   "arn:aws:sts::" + account + ":assumed-role/" + generatedName(role) + "/" + generatedName(fn),
			table:     "arn:aws:dynamodb:" + region + ":" + account + ":table/" + fmt.Sprint(env["TABLE_NAME"]),
			bucket:    "arn:aws:s3:::" + fmt.Sprint(env["BUCKET_NAME"]),
			prefix:    fmt.Sprint(env["UPLOAD_PREFIX"]),
			eventBus:  "arn:aws:events:" + region + ":" + account + ":event-bus/" + fmt.Sprint(env["EVENT_BUS_NAME"]),
			logStream: "arn:aws:logs:" + region + ":" + account + ":log-group:" + d.str(t, fn, "LoggingConfig", "LogGroup") + ":log-stream:2026/12/04/[$LATEST]0123456789abcdef",
			tracing:   d.str(t, fn, "TracingConfig", "Mode") == "Active",
		}
		for id, r := range d.cfn.Resources {
			if ref, _ := r.Properties["FunctionName"].(map[string]any); ref["Ref"] != fn {
				continue
			}
			switch r.Type {
			case "AWS::Lambda::EventSourceMapping":
				e.stream = d.str(t, id, "EventSourceArn")
				e.streamDLQ = d.str(t, id, "DestinationConfig", "OnFailure", "Destination")
			case "AWS::Lambda::EventInvokeConfig":
				e.asyncDLQ = d.str(t, id, "DestinationConfig", "OnFailure", "Destination")
			}
		}
		for _, rule := range d.property(t, "UploadBucket", "BucketEncryption", "ServerSideEncryptionConfiguration").([]any) {
			byDefault := rule.(map[string]any)["ServerSideEncryptionByDefault"].(map[string]any)
			if byDefault["SSEAlgorithm"] == "aws:kms" {
				e.key = fmt.Sprint(byDefault["KMSMasterKeyID"])
			}
		}
		out[fn] = e
	}
	return out
}

// uploadKey is an object an upload stores: UPLOAD_PREFIX and its id.
const uploadKey = "0123456789abcdef0123456789abcdef"

// calls lists every request made with each role in deployment d: what each
// function's code sends through the SDK (TestRecordedCallsAreListed holds
// this list to what the functions really send), what clients do with the
// URLs the presign function signs, what Lambda does with each role, and
// what S3 asks of KMS as the signer of a request when the bucket encrypts
// with a KMS key. S3 authorizes CreateMultipartUpload, UploadPart and
// CompleteMultipartUpload as s3:PutObject, HeadObject as s3:GetObject
// (and, for a missing object, s3:ListBucket on the bucket decides between
// 404 and 403), ListParts as s3:ListMultipartUploadParts.
func (d *deployment) calls(t *testing.T) []call {
	t.Helper()
	var out []call
	for fn, e := range d.functions(t) {
		object := e.bucket + "/" + e.prefix + uploadKey
		add := func(by, op, action, resource string, ctx map[string]string) {
			c := call{function: fn, role: e.role, by: by, op: op, action: action, resource: resource, context: ctx}
			switch {
			case strings.HasPrefix(action, "s3:"):
				c.resourcePolicy = "bucket"
				c.context = s3Context(ctx, by == byURL)
			case strings.HasPrefix(action, "kms:"):
				c.resourcePolicy = "key"
			}
			out = append(out, c)
		}
		// S3's calls to KMS for a request signed with this role, when the
		// bucket encrypts with a key (the template tests' kmsNeeds table).
		kms := func(op string, actions ...string) {
			if e.key == "" {
				return
			}
			for _, a := range actions {
				add(byS3, op, a, e.key, viaS3(e.bucket))
			}
		}
		logs := func() {
			add(byLambda, "CreateLogStream", "logs:CreateLogStream", e.logStream, nil)
			add(byLambda, "PutLogEvents", "logs:PutLogEvents", e.logStream, nil)
			if e.tracing {
				add(byLambda, "PutTraceSegments", "xray:PutTraceSegments", "*", nil)
				add(byLambda, "PutTelemetryRecords", "xray:PutTelemetryRecords", "*", nil)
			}
		}
		switch fn {
		case "PresignFunction":
			for _, op := range []string{"PutItem", "GetItem", "UpdateItem", "DeleteItem"} {
				add(byFunction, op, "dynamodb:"+op, e.table, nil)
			}
			add(byFunction, "Query", "dynamodb:Query", e.table+"/index/by_group", nil)
			add(byFunction, "CreateMultipartUpload", "s3:PutObject", object, map[string]string{"s3:ObjectCreationOperation": "false"})
			add(byFunction, "CompleteMultipartUpload", "s3:PutObject", object, map[string]string{"s3:ObjectCreationOperation": "true", "s3:if-none-match": "*"})
			add(byFunction, "HeadObject", "s3:GetObject", object, nil)
			add(byFunction, "HeadObject", "s3:ListBucket", e.bucket, nil)
			add(byFunction, "ListParts", "s3:ListMultipartUploadParts", object, nil)
			add(byFunction, "AbortMultipartUpload", "s3:AbortMultipartUpload", object, nil)
			add(byFunction, "DeleteObject", "s3:DeleteObject", object, nil)
			add(byURL, "PutObject", "s3:PutObject", object, map[string]string{"s3:ObjectCreationOperation": "true", "s3:if-none-match": "*"})
			add(byURL, "UploadPart", "s3:PutObject", object, map[string]string{"s3:ObjectCreationOperation": "false"})
			kms("PutObject (a URL)", "kms:GenerateDataKey")
			kms("UploadPart (a URL)", "kms:GenerateDataKey")
			kms("CreateMultipartUpload", "kms:GenerateDataKey", "kms:Decrypt")
			kms("CompleteMultipartUpload", "kms:Decrypt")
			kms("ListParts", "kms:Decrypt")
			kms("HeadObject with checksums", "kms:Decrypt")
			logs()
		case "FinalizeFunction":
			add(byFunction, "GetItem", "dynamodb:GetItem", e.table, nil)
			add(byFunction, "UpdateItem", "dynamodb:UpdateItem", e.table, nil)
			add(byFunction, "HeadObject", "s3:GetObject", object, nil)
			add(byFunction, "HeadObject", "s3:ListBucket", e.bucket, nil)
			add(byFunction, "DeleteObject", "s3:DeleteObject", object, nil)
			kms("HeadObject with checksums", "kms:Decrypt")
			// The on-failure destination of S3 events whose retries ran out.
			add(byLambda, "SendMessage", "sqs:SendMessage", e.asyncDLQ, nil)
			logs()
		case "EventsFunction":
			add(byFunction, "PutEvents", "events:PutEvents", e.eventBus, nil)
			// Lambda's event source mapping reads the table's stream with
			// the function's role; ListStreams authorizes on no resource.
			for _, op := range []string{"DescribeStream", "GetRecords", "GetShardIterator"} {
				add(byLambda, op, "dynamodb:"+op, e.stream, nil)
			}
			add(byLambda, "ListStreams", "dynamodb:ListStreams", "*", nil)
			add(byLambda, "SendMessage", "sqs:SendMessage", e.streamDLQ, nil)
			logs()
		}
	}
	return out
}

// s3Context is the context S3 sets on a request over HTTPS signed with
// SigV4: in the Authorization header, or the query string of a presigned
// URL; extra adds the operation's own keys.
func s3Context(extra map[string]string, presigned bool) map[string]string {
	ctx := map[string]string{"aws:SecureTransport": "true", "s3:signatureversion": "AWS4-HMAC-SHA256", "s3:authType": "REST-HEADER"}
	if presigned {
		ctx["s3:authType"] = "REST-QUERY-STRING"
	}
	for k, v := range extra {
		ctx[k] = v
	}
	return ctx
}

// viaS3 is the context of a KMS request that S3 makes for a caller in the
// stack's account: through S3 in the stack's region, with the bucket's ARN
// as encryption context (a Bucket Key).
func viaS3(bucket string) map[string]string {
	return map[string]string{
		"kms:ViaService":                   "s3." + region + ".amazonaws.com",
		"kms:CallerAccount":                account,
		"kms:EncryptionContext:aws:s3:arn": bucket,
	}
}

// keyPolicy is KMS's default key policy, which lets the account's IAM
// policies grant the key's use, as KmsKeyArn's description requires.
var keyPolicy = map[string]any{
	"Version": "2012-10-17",
	"Statement": []any{map[string]any{
		"Sid":       "Enable IAM User Permissions",
		"Effect":    "Allow",
		"Principal": map[string]any{"AWS": "arn:aws:iam::" + account + ":root"},
		"Action":    "kms:*",
		"Resource":  "*",
	}},
}
