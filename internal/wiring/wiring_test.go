package wiring_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/internal/config"
	"github.com/onceupload/onceupload/internal/wiring"
	"github.com/onceupload/onceupload/internal/wiring/events"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

// fakeDynamo answers DynamoDB's JSON protocol with one canned answer per
// operation and records what arrived, checking each request's signature.
type fakeDynamo struct {
	mu       sync.Mutex
	ops      []string
	failures []string
	answer   func(op string) (int, string)
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	f.mu.Lock()
	f.ops = append(f.ops, op)
	if err := verifySigV4(r, body, secret); err != nil {
		f.failures = append(f.failures, op+": "+err.Error())
	}
	f.mu.Unlock()
	status, answer := f.answer(op)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

// sdkEnvironment is what Lambda and a developer set: the SDK's own
// variables, read by config.LoadDefaultConfig, never by this project.
func sdkEnvironment(t *testing.T, vars map[string]string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": secret,
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_DYNAMODB": "", "AWS_ENDPOINT_URL_S3": "", "AWS_MAX_ATTEMPTS": "", "AWS_RETRY_MODE": "",
	} {
		t.Setenv(k, v)
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// The functions' clients go where AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_S3 say, make as many attempts as AWS_MAX_ATTEMPTS says,
// sign every request as it arrives, and count every attempt for the
// request's log line.
func TestServiceHonoursTheSDKsEnvironment(t *testing.T) {
	dynamo := &fakeDynamo{answer: func(op string) (int, string) {
		if op == "GetItem" {
			return 500, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"try again"}`
		}
		return 200, `{}`
	}}
	dynamoSrv := httptest.NewServer(dynamo)
	defer dynamoSrv.Close()
	const s3URL = "http://127.0.0.1:9/"
	sdkEnvironment(t, map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": dynamoSrv.URL, "AWS_ENDPOINT_URL_S3": s3URL, "AWS_MAX_ATTEMPTS": "2",
	})
	svc, _, err := wiring.Presign(context.Background(), lookup(map[string]string{
		"TABLE_NAME": "t", "BUCKET_NAME": "b", "S3_FORCE_PATH_STYLE": "true",
	}), discard)
	if err != nil {
		t.Fatal(err)
	}

	// A create: one PutItem at the endpoint, and a URL on the S3 endpoint.
	ctx, calls := callcount.WithScope(context.Background())
	reply, err := svc.Create(ctx, "tenant", "key-0123456789abcdef", api.CreateRequest{
		Filename: "a.txt", ContentType: "text/plain", Size: 1, SHA256: strings.Repeat("ab", 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	var created api.Upload
	if err := json.Unmarshal(reply.Body, &created); err != nil {
		t.Fatal(err)
	}
	if want := s3URL + "b/" + created.StorageKey + "?"; !strings.HasPrefix(created.Upload.URL, want) {
		t.Errorf("presigned URL %s, want it to start with %s", created.Upload.URL, want)
	}
	if got := calls.Ops(); got["DynamoDB"] != 1 || len(got) != 1 {
		t.Errorf("create counted %v, want one DynamoDB call", got)
	}

	// A status read that fails: AWS_MAX_ATTEMPTS attempts, all counted.
	ctx, calls = callcount.WithScope(context.Background())
	_, err = svc.Status(ctx, "tenant", reply.UploadID)
	if !errors.Is(err, idempotency.ErrUnavailable) {
		t.Errorf("status err = %v, want ErrUnavailable", err)
	}
	if got := calls.Ops(); got["DynamoDB"] != 2 {
		t.Errorf("status counted %v, want the 2 attempts AWS_MAX_ATTEMPTS allows", got)
	}
	dynamo.mu.Lock()
	defer dynamo.mu.Unlock()
	if want := []string{"PutItem", "GetItem", "GetItem"}; strings.Join(dynamo.ops, ",") != strings.Join(want, ",") {
		t.Errorf("DynamoDB received %v, want %v", dynamo.ops, want)
	}
	for _, f := range dynamo.failures {
		t.Error("signature: " + f)
	}
}

// Bad settings stop the function at start with a message that names them.
func TestServiceRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
		sdk, own      map[string]string
	}{
		{"no region", "no region", map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": ""}, nil},
		{"bad path style", "S3_FORCE_PATH_STYLE", nil, map[string]string{"S3_FORCE_PATH_STYLE": "sometimes"}},
		{"bad retry mode", "AWS_RETRY_MODE", map[string]string{"AWS_RETRY_MODE": "hopeful"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sdkEnvironment(t, tc.sdk)
			own := map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b"}
			for k, v := range tc.own {
				own[k] = v
			}
			_, _, err := wiring.Presign(context.Background(), lookup(own), discard)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

// The dev stack's clients ignore the developer's own AWS settings: a
// profile that does not exist here, or a FIPS switch, would break them.
func TestLocalIgnoresTheProcessEnvironment(t *testing.T) {
	sdkEnvironment(t, map[string]string{"AWS_PROFILE": "nope", "AWS_USE_FIPS_ENDPOINT": "true", "AWS_REGION": ""})
	svc, _, err := wiring.Presign(context.Background(), lookup(map[string]string{
		"TABLE_NAME": "t", "BUCKET_NAME": "b", "S3_FORCE_PATH_STYLE": "true",
	}), discard, wiring.Local("http://127.0.0.1:9", "http://127.0.0.1:9", aws.NewCredentialsCache(
		credentials.NewStaticCredentialsProvider("local", "localsecret", "")), "us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	reply, err := svc.Create(context.Background(), "tenant", "key-0123456789abcdef", api.CreateRequest{
		Filename: "a.txt", ContentType: "text/plain", Size: 1, SHA256: strings.Repeat("ab", 32),
	})
	if err == nil {
		t.Fatalf("create answered %s with no DynamoDB listening", reply.Body)
	}
	if msg := strings.ToLower(err.Error()); strings.Contains(msg, "fips") || strings.Contains(msg, "profile") {
		t.Errorf("create failed on the process's AWS settings: %v", err)
	}
}

// recorded is a lookup on env that records every name read through it.
type recorded struct {
	env   map[string]string
	mu    sync.Mutex
	names map[string]bool
}

func (r *recorded) lookup(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[name] = true
	v, ok := r.env[name]
	return v, ok
}

func (r *recorded) read() []string { return slices.Sorted(maps.Keys(r.names)) }

// Each function reads its own variables through config and nothing else:
// built by wiring, it reads exactly the names its config section reads
// (config's tests hold that every one is documented), whatever else the
// environment holds.
func TestFunctionsReadTheEnvironmentThroughConfigOnly(t *testing.T) {
	sdkEnvironment(t, nil)
	ctx := context.Background()
	env := map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b", "S3_FORCE_PATH_STYLE": "true", "EVENT_SOURCE": "com.example"}
	for _, tc := range []struct {
		name       string
		wire, load func(lookup func(string) (string, bool)) error
	}{
		{
			"presign",
			func(l func(string) (string, bool)) error { _, _, err := wiring.Presign(ctx, l, discard); return err },
			func(l func(string) (string, bool)) error { _, err := config.LoadPresign(l); return err },
		},
		{
			"finalize",
			func(l func(string) (string, bool)) error { _, _, err := wiring.Finalize(ctx, l, discard); return err },
			func(l func(string) (string, bool)) error { _, err := config.LoadFinalize(l); return err },
		},
		{
			"events",
			func(l func(string) (string, bool)) error { _, err := events.New(ctx, l, discard); return err },
			func(l func(string) (string, bool)) error { _, err := config.LoadEvents(l); return err },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wired, loaded := &recorded{env: env}, &recorded{env: env}
			if err := tc.wire(wired.lookup); err != nil {
				t.Fatal(err)
			}
			if err := tc.load(loaded.lookup); err != nil {
				t.Fatal(err)
			}
			if got, want := wired.read(), loaded.read(); !slices.Equal(got, want) || len(want) == 0 {
				t.Errorf("the %s function read %v, want what its config section reads, %v", tc.name, got, want)
			}
		})
	}
}
