package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/callcount"
)

// CheckEMF checks one log line against the structure CloudWatch's embedded
// metric format specification requires: an "_aws" member with an integer
// millisecond Timestamp and CloudWatchMetrics directives, each with a
// Namespace, Dimensions (sets of at most 30 names, each a root member
// whose value is a string) and Metrics (at most 100, each a root member
// whose value is a number, with a valid Unit).
func CheckEMF(t *testing.T, line []byte) map[string]any {
	t.Helper()
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		t.Fatalf("not a JSON object: %s", line)
	}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		t.Fatalf("no _aws member: %s", line)
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if _, err := ts.Int64(); !ok || err != nil {
		t.Fatalf("_aws.Timestamp %v is not an integer of milliseconds", aws["Timestamp"])
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		t.Fatalf("_aws.CloudWatchMetrics is not a non-empty array: %s", line)
	}
	units := []string{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
		"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second", "Kilobytes/Second",
		"Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second",
		"Gigabits/Second", "Terabits/Second", "Count/Second", "None"}
	for _, d := range directives {
		dir, _ := d.(map[string]any)
		if ns, _ := dir["Namespace"].(string); ns == "" || len(ns) > 255 {
			t.Fatalf("Namespace %v", dir["Namespace"])
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok {
			t.Fatalf("Dimensions %v is not an array", dir["Dimensions"])
		}
		for _, set := range sets {
			names, ok := set.([]any)
			if !ok || len(names) > 30 {
				t.Fatalf("dimension set %v", set)
			}
			for _, n := range names {
				name, _ := n.(string)
				if v, ok := root[name].(string); !ok || v == "" {
					t.Fatalf("dimension %q has no string value at the root: %v", name, root[name])
				}
			}
		}
		metrics, ok := dir["Metrics"].([]any)
		if !ok || len(metrics) == 0 || len(metrics) > 100 {
			t.Fatalf("Metrics %v", dir["Metrics"])
		}
		for _, m := range metrics {
			metric, _ := m.(map[string]any)
			name, _ := metric["Name"].(string)
			if _, ok := root[name].(json.Number); name == "" || !ok {
				t.Fatalf("metric %q has no number at the root: %v", name, root[name])
			}
			if unit, ok := metric["Unit"].(string); ok && !slices.Contains(units, unit) {
				t.Fatalf("metric %q has unit %q", name, unit)
			}
		}
	}
	return root
}

// A request's line is a valid EMF document carrying its outcome, latency
// and the DynamoDB calls made with its context, and nothing else's.
func TestRequestLine(t *testing.T) {
	t.Parallel()
	ddbServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer ddbServer.Close()
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(ddbServer.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		APIOptions:  []func(*middleware.Stack) error{callcount.ScopeAPIOptions}})
	get := &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}
	var buf bytes.Buffer
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rec := &Recorder{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Namespace: "test-ns", Function: "presign",
		Now: func() time.Time { clock = clock.Add(1500 * time.Microsecond); return clock }}

	ctx, req := rec.Start(context.Background())
	for range 2 {
		if _, err := ddb.GetItem(ctx, get); err != nil {
			t.Fatal(err)
		}
	}
	// A call made outside the request's context is not its call.
	_, _ = ddb.GetItem(context.Background(), get)
	req.Done(ctx, OutcomeReplayed, "POST /uploads", "req-1")

	root := CheckEMF(t, buf.Bytes())
	want := map[string]string{"Function": "presign", "Outcome": "replayed", "Requests": "1", "Latency": "1.5",
		"route": "POST /uploads", "request_id": "req-1", "dynamodb_calls": "2", "s3_calls": "0"}
	for k, v := range want {
		if got := strings.Trim(string(mustJSON(root[k])), `"`); got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
	}
	if ns := root["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Namespace"]; ns != "test-ns" {
		t.Errorf("namespace %v", ns)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestTally(t *testing.T) {
	t.Parallel()
	var tally Tally
	logger := slog.New(tally.Handler(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	for _, o := range []string{OutcomeCreated, OutcomeCreated, OutcomeReplayed} {
		_, req := (&Recorder{Logger: logger, Function: "presign"}).Start(context.Background())
		req.Done(context.Background(), o, "POST /uploads", "")
	}
	_, req := (&Recorder{Logger: logger, Function: "finalize"}).Start(context.Background())
	req.Done(context.Background(), OutcomeCompleted, "s3:ObjectCreated:Put", "")
	logger.Info("an ordinary line is not counted")
	got, lines := tally.String()
	if got != "finalize completed=1, presign created=2 replayed=1" || lines != 4 {
		t.Fatalf("tally %q over %d lines", got, lines)
	}
}
