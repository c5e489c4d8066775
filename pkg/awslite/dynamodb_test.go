package awslite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/pkg/awslite"
)

// answer is one canned DynamoDB response.
type answer struct {
	status  int
	body    string
	badCRC  bool
	hangUp  bool
	errType string // X-Amzn-ErrorType, for a body without __type
}

// fakeDynamo serves answers in turn (the last one repeats) and records
// each request it got.
func fakeDynamo(t *testing.T, answers ...answer) (*awslite.DynamoDB, *[]*http.Request, *[]string) {
	t.Helper()
	var reqs []*http.Request
	var bodies []string
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs, bodies = append(reqs, r), append(bodies, string(b))
		i := min(int(n.Add(1))-1, len(answers)-1)
		a := answers[i]
		if a.hangUp {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		crc := crc32.ChecksumIEEE([]byte(a.body))
		if a.badCRC {
			crc++
		}
		w.Header().Set("X-Amz-Crc32", fmt.Sprint(crc))
		w.Header().Set("X-Amzn-Requestid", "req-1")
		if a.errType != "" {
			w.Header().Set("X-Amzn-Errortype", a.errType)
		}
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.MaxBackoff = time.Millisecond
			})
		},
	}
	c, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) { o.BaseEndpoint = srv.URL })
	if err != nil {
		t.Fatal(err)
	}
	return c, &reqs, &bodies
}

func TestDynamoRequestIsTheProtocols(t *testing.T) {
	c, reqs, bodies := fakeDynamo(t, answer{status: 200, body: `{"Item":{"pk":{"S":"a"},"n":{"N":"42"},"m":{"M":{}}}}`})
	out, err := c.GetItem(context.Background(), &awslite.GetItemInput{TableName: "t", Key: map[string]awslite.AttributeValue{"pk": awslite.S("a")}, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	r := (*reqs)[0]
	for h, want := range map[string]string{
		"X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0", "Accept-Encoding": "identity",
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if auth := r.Header.Get("Authorization"); !strings.Contains(auth, "/eu-west-1/dynamodb/aws4_request") || !strings.Contains(auth, "x-amz-target") {
		t.Errorf("Authorization = %q: not SigV4 for dynamodb in eu-west-1 over the target header", auth)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		t.Errorf("%s %s, want POST /", r.Method, r.URL.Path)
	}
	if want := `{"TableName":"t","Key":{"pk":{"S":"a"}},"ConsistentRead":true}`; (*bodies)[0] != want {
		t.Errorf("body %s, want %s", (*bodies)[0], want)
	}
	if s, _ := out.Item["pk"].AsString(); s != "a" {
		t.Errorf("pk = %q", s)
	}
	if n, err := out.Item["n"].AsInt(); n != 42 || err != nil {
		t.Errorf("n = %d, %v", n, err)
	}
	if m := out.Item["m"].M; m == nil || len(m) != 0 {
		t.Errorf("m = %#v, want an empty map", m)
	}
}

func TestDynamoConditionalCheckFailedCarriesTheItem(t *testing.T) {
	c, reqs, _ := fakeDynamo(t, answer{status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{"pk":{"S":"held"}}}`})
	_, err := c.PutItem(context.Background(), &awslite.PutItemInput{TableName: "t", Item: map[string]awslite.AttributeValue{"pk": awslite.S("held")}})
	item, ok := awslite.ConditionalCheckFailed(err)
	if !ok || len(*reqs) != 1 {
		t.Fatalf("err = %v after %d attempts; want one ConditionalCheckFailedException", err, len(*reqs))
	}
	if s, _ := item["pk"].AsString(); s != "held" {
		t.Errorf("item = %v", item)
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ConditionalCheckFailedException" || apiErr.ErrorFault() != smithy.FaultClient {
		t.Errorf("smithy.APIError = %v", apiErr)
	}
	var opErr *smithy.OperationError
	if !errors.As(err, &opErr) || opErr.Service() != "DynamoDB" || opErr.Operation() != "PutItem" {
		t.Errorf("operation error = %v", opErr)
	}
	if _, ok := awslite.ConditionalCheckFailed(errors.New("other")); ok {
		t.Error("any error taken for a conditional check failure")
	}
}

// Retries follow the SDK's retryer: throttling, 5xx, corrupted bodies and
// broken connections are retried; a client error is not.
func TestDynamoRetries(t *testing.T) {
	ok := answer{status: 200, body: `{}`}
	cases := []struct {
		name     string
		answers  []answer
		attempts int
		code     string // the final error's code, "" for success
	}{
		{"throttled then ok", []answer{{status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}`}, ok}, 2, ""},
		{"provisioned throughput", []answer{{status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}`}, ok}, 2, ""},
		{"server error then ok", []answer{{status: 500, body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}`}, ok}, 2, ""},
		{"503 without a body", []answer{{status: 503, body: ``}, ok}, 2, ""},
		{"corrupted body", []answer{{status: 200, body: `{}`, badCRC: true}, ok}, 2, ""},
		{"connection dropped", []answer{{hangUp: true}, ok}, 2, ""},
		{"validation is final", []answer{{status: 400, body: `{"__type":"com.amazon.coral.validate#ValidationException","Message":"bad"}`}}, 1, "ValidationException"},
		{"header error type", []answer{{status: 400, body: `{}`, errType: "ResourceNotFoundException:http://internal.amazon.com/"}}, 1, "ResourceNotFoundException"},
		{"throttled throughout", []answer{{status: 400, body: `{"__type":"x#ThrottlingException"}`}}, 3, "ThrottlingException"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, reqs, _ := fakeDynamo(t, tc.answers...)
			_, err := c.GetItem(context.Background(), &awslite.GetItemInput{TableName: "t"})
			if len(*reqs) != tc.attempts {
				t.Errorf("%d attempts, want %d (err %v)", len(*reqs), tc.attempts, err)
			}
			var apiErr smithy.APIError
			switch {
			case tc.code == "" && err != nil:
				t.Errorf("err = %v, want success", err)
			case tc.code != "" && (!errors.As(err, &apiErr) || apiErr.ErrorCode() != tc.code):
				t.Errorf("err = %v, want code %s", err, tc.code)
			}
		})
	}
}

func TestDynamoOnAttemptCountsRetries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var seen []string
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 2; o.MaxBackoff = time.Millisecond })
	}
	c, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) {
		o.BaseEndpoint = srv.URL
		o.OnAttempt = func(_ context.Context, service, op string) { seen = append(seen, service+"."+op) }
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteItem(context.Background(), &awslite.DeleteItemInput{TableName: "t"})
	var maxErr *retry.MaxAttemptsError
	if !errors.As(err, &maxErr) {
		t.Errorf("err = %v, want MaxAttemptsError", err)
	}
	if want := []string{"DynamoDB.DeleteItem", "DynamoDB.DeleteItem"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("attempts %v, want %v", seen, want)
	}
}

// recordingHTTP answers every request with status and an empty JSON body,
// and records the URLs it was sent to.
type recordingHTTP struct {
	status int
	urls   []string
}

func (r *recordingHTTP) Do(req *http.Request) (*http.Response, error) {
	r.urls = append(r.urls, req.URL.String())
	return &http.Response{StatusCode: r.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: req}, nil
}

// Without settings of its own, a client goes to the region's endpoint and
// retries as the SDK's DynamoDB client does: 4 attempts, the standard
// retryer's backoff.
func TestDynamoDefaultsAreTheSDKs(t *testing.T) {
	for _, tc := range []struct {
		status   int
		attempts int
	}{{200, 1}, {503, 4}} {
		rec := &recordingHTTP{status: tc.status}
		c, err := awslite.NewDynamoDB(aws.Config{Region: "cn-north-1", HTTPClient: rec, Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.GetItem(context.Background(), &awslite.GetItemInput{TableName: "t"})
		if len(rec.urls) != tc.attempts {
			t.Errorf("HTTP %d: %d attempts, want %d", tc.status, len(rec.urls), tc.attempts)
		}
		if rec.urls[0] != "https://dynamodb.cn-north-1.amazonaws.com.cn/" {
			t.Errorf("sent to %s", rec.urls[0])
		}
	}
	if _, err := awslite.NewDynamoDB(aws.Config{}); err == nil {
		t.Error("no region accepted")
	}
	if _, err := awslite.NewDynamoDB(aws.Config{Region: "x"}, func(o *awslite.Options) { o.BaseEndpoint = "ftp://x" }); err == nil {
		t.Error("an endpoint of another scheme accepted")
	}
}

func TestDynamoCanceledIsNotRetried(t *testing.T) {
	c, reqs, _ := fakeDynamo(t, answer{status: 500, body: `{}`})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.GetItem(ctx, &awslite.GetItemInput{TableName: "t"})
	if !errors.Is(err, context.Canceled) || len(*reqs) != 0 {
		t.Errorf("err = %v after %d requests, want context.Canceled and none", err, len(*reqs))
	}
}

func TestAttributeValueJSON(t *testing.T) {
	in := map[string]awslite.AttributeValue{
		"s": awslite.S(""), "n": awslite.N(-7), "m": {M: map[string]awslite.AttributeValue{}},
		"l": {L: []awslite.AttributeValue{awslite.S("x")}}, "b": {B: []byte{1, 2}}, "t": {BOOL: aws.Bool(false)}, "z": {NULL: aws.Bool(true)},
		"ss": {SS: []string{"a"}},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":{"B":"AQI="},"l":{"L":[{"S":"x"}]},"m":{"M":{}},"n":{"N":"-7"},"s":{"S":""},"ss":{"SS":["a"]},"t":{"BOOL":false},"z":{"NULL":true}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back map[string]awslite.AttributeValue
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); string(b2) != want {
		t.Errorf("round trip %s", b2)
	}
}

func TestAdaptiveRetryModeIsHonoured(t *testing.T) {
	c, err := awslite.NewDynamoDB(aws.Config{Region: "eu-west-1", RetryMode: aws.RetryModeAdaptive})
	if err != nil {
		t.Fatal(err)
	}
	r := awslite.RetryerOf(c)
	if got := r.MaxAttempts(); got != 4 {
		t.Errorf("adaptive mode max attempts %d, want DynamoDB's 4", got)
	}
	if _, ok := r.(*retry.AdaptiveMode); !ok {
		t.Errorf("retryer %T, want *retry.AdaptiveMode", r)
	}
}

// spyRetryer is the standard retryer, recording the errors its backoff is
// asked about.
type spyRetryer struct {
	aws.RetryerV2
	delays []error
}

func (s *spyRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	s.delays = append(s.delays, err)
	return time.Millisecond, nil
}

// The retryer's backoff is asked with the attempt's error, so a throttle
// backs off from the retryer's throttle base, as in the SDK's loop.
func TestRetryDelaySeesTheError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}`)
	}))
	defer srv.Close()
	spy := &spyRetryer{RetryerV2: retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 3 })}
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		Retryer: func() aws.Retryer { return spy }}
	c, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) { o.BaseEndpoint = srv.URL })
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.GetItem(context.Background(), &awslite.GetItemInput{TableName: "t"})
	if len(spy.delays) != 2 {
		t.Fatalf("backoff asked %d times, want 2", len(spy.delays))
	}
	for _, err := range spy.delays {
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
			t.Errorf("backoff asked about %v, want the ThrottlingException", err)
		}
	}
}

// When the retry quota runs out, the error still says what the service
// answered, so callers still see a throttle (a 503 for the API's clients).
func TestQuotaExhaustionKeepsTheError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts, o.MaxBackoff = 10, time.Millisecond
				o.RateLimiter = ratelimit.NewTokenRateLimit(5) // one retry's worth
			})
		}}
	c, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) { o.BaseEndpoint = srv.URL })
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetItem(context.Background(), &awslite.GetItemInput{TableName: "t"})
	var quota ratelimit.QuotaExceededError
	var apiErr *awslite.Error
	if !errors.As(err, &quota) || !errors.As(err, &apiErr) || apiErr.HTTPStatusCode() != 503 {
		t.Errorf("err = %v, want the quota error and the 503 it stopped at", err)
	}
}

// A 429 without a code the retryer knows is retried, as the SDK retries
// one it could not match to a modeled error; X-Amz-Retry-After stretches
// the backoff.
func TestTooManyRequestsIsRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("X-Amz-Retry-After", "150")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `<html>rate limited by a proxy</html>`)
			return
		}
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond })
		}}
	c, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) { o.BaseEndpoint = srv.URL })
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.GetItem(context.Background(), &awslite.GetItemInput{TableName: "t"}); err != nil || n.Load() != 2 {
		t.Fatalf("err = %v after %d attempts, want success on the second", err, n.Load())
	}
	// Not a timing assertion of speed: the wait is the server's ask.
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("retried after %v, before the 150 ms X-Amz-Retry-After", waited)
	}
}
