package recordstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// TestRoundTrips counts the HTTP calls each operation sends to a real local
// DynamoDB: the design's budget is exactly one each.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(sharedDynoxide(t), nil)
	store := dynamostore.New(testenv.DynamoClient(sharedDynoxide(t), &counter), testenv.NewTable(t, client))
	id := idempotency.NewID("t", "round-trips")

	steps := []struct {
		name string
		run  func() error
		want map[string]int
	}{
		{"claim", func() error { _, err := store.ClaimRecord(ctx, pending(id, "c1", "fp", `{}`)); return err }, map[string]int{"PutItem": 1}},
		{"replay", func() error {
			res, err := store.ClaimRecord(ctx, pending(id, "c2", "fp", `{}`))
			if err == nil && !res.Replayed {
				err = errors.New("not a replay")
			}
			return err
		}, map[string]int{"PutItem": 1}},
		{"reuse", func() error {
			if _, err := store.ClaimRecord(ctx, pending(id, "c2", "other", `{}`)); !errors.Is(err, idempotency.ErrKeyReused) {
				return fmt.Errorf("want ErrKeyReused, got %v", err)
			}
			return nil
		}, map[string]int{"PutItem": 1}},
		{"get", func() error { _, err := store.GetRecord(ctx, id); return err }, map[string]int{"GetItem": 1}},
		{"complete", func() error {
			_, err := store.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted})
			return err
		}, map[string]int{"UpdateItem": 1}},
		{"duplicate completion", func() error {
			_, err := store.Update(ctx, id, "c1", recordstore.Update{State: idempotency.StateCompleted})
			if !errors.Is(err, idempotency.ErrAlreadyCompleted) {
				return fmt.Errorf("want ErrAlreadyCompleted, got %v", err)
			}
			return nil
		}, map[string]int{"UpdateItem": 1}},
		{"count a group", func() error { _, err := store.CountGroup(ctx, "g", id); return err }, map[string]int{"Query": 1}},
	}
	for _, step := range steps {
		counter.Reset()
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := counter.Ops(); !maps.Equal(got, step.want) {
			t.Errorf("%s sent %v, want %v", step.name, got, step.want)
		}
	}
}

// TestFallbackWithoutAllOld runs against dynalite, which drops the item that
// ReturnValuesOnConditionCheckFailure=ALL_OLD asks for: the store must still
// judge the holder correctly, with one consistent GetItem more.
func TestFallbackWithoutAllOld(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(sharedDynalite(t), nil)
	store := dynamostore.New(testenv.DynamoClient(sharedDynalite(t), &counter), testenv.NewTable(t, client))
	id := idempotency.NewID("t", "fallback")

	// Prove the server really ignores ALL_OLD, or this test proves nothing.
	if _, err := store.ClaimRecord(ctx, pending(id, "c1", "fp", `{"first":true}`)); err != nil {
		t.Fatal(err)
	}
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: ptr(store.TableName()), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: string(id)}},
		ConditionExpression:                 ptr("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || len(ccf.Item) != 0 {
		t.Fatalf("dynalite returned %v with item %v; the fallback is not exercised", err, ccf)
	}

	counter.Reset()
	res, err := store.ClaimRecord(ctx, pending(id, "c2", "fp", `{}`))
	if err != nil || !res.Replayed || string(res.Record.Response.Body) != `{"first":true}` {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	if got, want := counter.Ops(), map[string]int{"PutItem": 1, "GetItem": 1}; !maps.Equal(got, want) {
		t.Errorf("replay sent %v, want %v", got, want)
	}
	if _, err := store.ClaimRecord(ctx, pending(id, "c3", "other", `{}`)); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("reuse through the fallback: %v, want ErrKeyReused", err)
	}
}

// TestClaimRace: 200 goroutines claim one key at once on a real server.
// Exactly one wins; every other sees a replay of the winner's claim.
func TestClaimRace(t *testing.T) {
	ctx := context.Background()
	client := testenv.DynamoClient(sharedDynoxide(t), nil)
	store := dynamostore.New(client, testenv.NewTable(t, client))
	id := idempotency.NewID("t", "race")

	const n = 200
	var wg sync.WaitGroup
	results := make([]recordstore.ClaimResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = store.ClaimRecord(ctx, pending(id, fmt.Sprintf("claim-%d", i), "fp", fmt.Sprintf(`{"i":%d}`, i)))
		})
	}
	close(start)
	wg.Wait()

	winners, claimIDs := 0, map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		if !results[i].Replayed {
			winners++
		}
		claimIDs[results[i].Record.ClaimID]++
	}
	if winners != 1 || len(claimIDs) != 1 {
		t.Fatalf("winners = %d, distinct claim ids = %v; want 1 winner seen by all", winners, claimIDs)
	}
}

// fakeDynamo answers every call with err.
type fakeDynamo struct{ err error }

var _ dynamostore.DynamoDBAPI = fakeDynamo{}

func (f fakeDynamo) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, f.err
}

// pagedCount answers a count query in pages of one, from a group of size.
type pagedCount struct {
	fakeDynamo
	size    int
	queries []*dynamodb.QueryInput
}

func (p *pagedCount) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	sent := *in // the store reuses its input for the next page
	p.queries = append(p.queries, &sent)
	out := &dynamodb.QueryOutput{Count: 1}
	if len(p.queries) < p.size {
		out.LastEvaluatedKey = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: strconv.Itoa(len(p.queries))}}
	}
	return out, nil
}

// CountGroup asks the index for a count of keys, not the items, leaves out
// the caller's own record and the expired ones in the query itself, and
// follows every page.
func TestCountGroupQuery(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	client := &pagedCount{size: 3}
	store := dynamostore.New(client, "table", func(o *idempotency.Options) { o.Now = func() time.Time { return now } })
	own := idempotency.NewID("t", "own")
	n, err := store.CountGroup(context.Background(), "g", own)
	if err != nil || n != 3 || len(client.queries) != 3 {
		t.Fatalf("CountGroup = %d, %v after %d queries; want 3 after 3", n, err, len(client.queries))
	}
	q := client.queries[0]
	if aws.ToString(q.IndexName) != "by_group" || q.Select != types.SelectCount || q.ConsistentRead != nil || q.ExclusiveStartKey != nil {
		t.Errorf("first query: index %q, select %q, consistent %v, start %v", aws.ToString(q.IndexName), q.Select, q.ConsistentRead, q.ExclusiveStartKey)
	}
	vals := map[string]string{}
	for k, v := range q.ExpressionAttributeValues {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			vals[k] = v.Value
		case *types.AttributeValueMemberN:
			vals[k] = v.Value
		}
	}
	for _, want := range []string{"g", string(own), strconv.FormatInt(now.Unix(), 10)} {
		if !slices.Contains(slices.Collect(maps.Values(vals)), want) {
			t.Errorf("query values %v lack %q", vals, want)
		}
	}
	if !strings.Contains(aws.ToString(q.KeyConditionExpression), ">=") || !strings.Contains(aws.ToString(q.FilterExpression), "<>") {
		t.Errorf("key condition %q, filter %q", aws.ToString(q.KeyConditionExpression), aws.ToString(q.FilterExpression))
	}
	if next := client.queries[1].ExclusiveStartKey; next == nil {
		t.Error("the second page did not start after the first")
	}
	if _, err := store.CountGroup(context.Background(), "", ""); err == nil {
		t.Error("a count of no group was sent")
	}
}

// answered is err as the SDK's client returns an error answer of status:
// the operation's error around the response's.
func answered(status int, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}}, Err: err,
	}}
}

// unsent is err as the SDK's client returns a request that got no answer.
func unsent(err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithyhttp.RequestSendError{Err: err}}
}

// conditionFailed is a conditional write's refusal as the SDK's client
// returns it, with the item ReturnValuesOnConditionCheckFailure=ALL_OLD
// brought back (nil: none).
func conditionFailed(op string, item map[string]types.AttributeValue) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400, Header: http.Header{}}},
		Err:      &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: item},
	}}
}

// TestErrorsAreClassified: what the SDK's client gives up with is marked
// ErrUnavailable (a 503 for the API's clients) when a later retry can cure
// it, by every operation, with the cause kept.
func TestErrorsAreClassified(t *testing.T) {
	throttled := answered(400, &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")})
	cases := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"provisioned throughput exceeded", throttled, true},
		{"throttling", answered(400, &smithy.GenericAPIError{Code: "ThrottlingException"}), true},
		{"throttling, bare", &smithy.GenericAPIError{Code: "ThrottlingException"}, true},
		{"transaction conflict", answered(400, &types.TransactionConflictException{Message: aws.String("busy")}), true},
		{"throttling, modeled", answered(400, &types.ThrottlingException{Message: aws.String("slow down")}), true},
		{"request limit exceeded", answered(400, &types.RequestLimitExceeded{Message: aws.String("account limit")}), true},
		{"429 from a proxy", answered(429, &smithy.GenericAPIError{Code: "UnknownError", Message: "rate limited"}), true},
		{"500", answered(500, &types.InternalServerError{Message: aws.String("oops")}), true},
		{"503", answered(503, &smithy.GenericAPIError{Code: "ServiceUnavailable", Fault: smithy.FaultServer}), true},
		{"connection refused", unsent(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{"connection reset", unsent(&url.Error{Op: "Post", URL: "https://dynamodb", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}), true},
		{"retries exhausted", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &retry.MaxAttemptsError{Attempt: 4, Err: throttled}}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"deadline, as the client reports it", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithy.CanceledError{Err: context.DeadlineExceeded}}, true},
		{"missing table", answered(400, &types.ResourceNotFoundException{Message: aws.String("no table")}), false},
		{"validation", answered(400, &smithy.GenericAPIError{Code: "ValidationException", Message: "bad", Fault: smithy.FaultClient}), false},
		{"canceled", context.Canceled, false},
		{"canceled, as the client reports it", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &smithy.CanceledError{Err: context.Canceled}}, false},
		{"not an AWS error", errors.New("boom"), false},
	}
	ctx := context.Background()
	id := idempotency.NewID("t", "k")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := recordstore.Transient(tc.err); got != tc.unavailable {
				t.Errorf("Transient = %v, want %v", got, tc.unavailable)
			}
			classified := recordstore.Classify(tc.err)
			if !errors.Is(classified, tc.err) || errors.Is(classified, idempotency.ErrUnavailable) != tc.unavailable {
				t.Errorf("Classify = %v, want the cause, unavailable: %v", classified, tc.unavailable)
			}
			if !tc.unavailable && classified != tc.err {
				t.Errorf("Classify changed an error no retry cures: %v", classified)
			}
			store := dynamostore.New(fakeDynamo{err: tc.err}, "table")
			_, claimErr := store.ClaimRecord(ctx, pending(id, "c", "fp", `{}`))
			_, getErr := store.GetRecord(ctx, id)
			_, updErr := store.Update(ctx, id, "c", recordstore.Update{State: idempotency.StateCompleted})
			relErr := store.Release(ctx, id, "c")
			for op, err := range map[string]error{"claim": claimErr, "get": getErr, "update": updErr, "release": relErr} {
				if err == nil || !errors.Is(err, tc.err) {
					t.Errorf("%s: %v does not wrap the cause", op, err)
				}
				if got := errors.Is(err, idempotency.ErrUnavailable); got != tc.unavailable {
					t.Errorf("%s: unavailable = %v, want %v", op, got, tc.unavailable)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// vanishingHolder fails the first conditional put as a held key whose
// holder is gone by the time it is read (no item comes back), then lets the
// second put through; it records the lease each put wrote.
type vanishingHolder struct {
	fakeDynamo
	puts, gets int
	leases     []string
}

func (v *vanishingHolder) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	v.puts++
	if n, ok := in.Item["lease_expires_at"].(*types.AttributeValueMemberN); ok {
		v.leases = append(v.leases, n.Value)
	}
	if v.puts == 1 {
		return nil, conditionFailed("PutItem", nil)
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (v *vanishingHolder) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	v.gets++
	return &dynamodb.GetItemOutput{}, nil
}

// The claim's second attempt keeps the lease the caller asked for (a
// function's remaining time), not the store's default.
func TestClaimRetryKeepsTheCallersLease(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	client := &vanishingHolder{}
	s := dynamostore.New(client, "t", func(o *idempotency.Options) { o.Now = func() time.Time { return now } })
	res, err := s.ClaimRecord(context.Background(), recordstore.Record{Record: idempotency.Record{ID: idempotency.NewID("t", "k"), ClaimID: "c", Fingerprint: "f", State: idempotency.StateInProgress, Lease: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(now.Add(10*time.Minute).UnixMilli(), 10)
	if len(client.leases) != 2 || client.leases[0] != want || client.leases[1] != want || !res.Record.LeaseExpiresAt.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("leases written %v, returned %s; want both %s", client.leases, res.Record.LeaseExpiresAt, want)
	}
	if client.gets != 1 {
		t.Errorf("%d GetItem calls, want 1 (the refusal brought no item back)", client.gets)
	}
}

// echoOwnWrite fails the first put as a held key whose holder is the item
// being put: the put was written, its answer lost, and the retry met it.
type echoOwnWrite struct {
	fakeDynamo
	puts int
}

func (e *echoOwnWrite) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	e.puts++
	return nil, conditionFailed("PutItem", maps.Clone(in.Item))
}

// A claim that meets its own write (a retried put whose first answer was
// lost) is the claim, not a replay and not someone else's claim in
// progress, which would block the key for the lease.
func TestClaimThatMeetsItsOwnWrite(t *testing.T) {
	for _, rec := range []recordstore.Record{
		pending(idempotency.NewID("t", "own-pending"), "c1", "fp", `{"a":1}`),
		inProgress(idempotency.NewID("t", "own-in-progress"), "c1", "fp"),
	} {
		client := &echoOwnWrite{}
		res, err := dynamostore.New(client, "t").ClaimRecord(context.Background(), rec)
		if err != nil || res.Replayed || res.Record.ClaimID != "c1" || client.puts != 1 {
			t.Errorf("%s claim: %+v, %v after %d puts; want the claim itself after 1", rec.State, res, err, client.puts)
		}
	}
}

// fastRetryer is the SDK's standard retryer with attempts in all and no
// wait between them, changed by optFns.
func fastRetryer(attempts int, optFns ...func(*retry.StandardOptions)) aws.Retryer {
	return retry.NewStandard(append([]func(*retry.StandardOptions){func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	}}, optFns...)...)
}

// TestClaimAfterALostAnswer drops the answer of a claim's put on its way
// back from a real server, as a network fault would: the put is written,
// the SDK's client retries it, and the retry meets the claim's own item.
// The claim must recognise it as itself, whether the server brings the
// item back (dynoxide) or the store reads it (dynalite).
func TestClaimAfterALostAnswer(t *testing.T) {
	servers := []struct {
		name     string
		endpoint func(testing.TB) string
		want     map[string]int
	}{
		{"dynoxide", sharedDynoxide, map[string]int{"PutItem": 2}},
		{"dynalite", sharedDynalite, map[string]int{"PutItem": 2, "GetItem": 1}},
	}
	for _, server := range servers {
		t.Run(server.name, func(t *testing.T) {
			ctx := context.Background()
			endpoint := server.endpoint(t)
			target, err := url.Parse(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			var puts, dropped atomic.Int32
			proxy := httputil.NewSingleHostReverseProxy(target)
			proxy.ModifyResponse = func(resp *http.Response) error {
				if !strings.HasSuffix(resp.Request.Header.Get("X-Amz-Target"), ".PutItem") || puts.Add(1)%2 == 0 {
					return nil
				}
				// The server wrote the item; its answer is replaced by a
				// fault the client retries.
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("the put to drop was answered %s", resp.Status)
				}
				dropped.Add(1)
				resp.Body.Close()
				body := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"answer lost"}`
				resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
				resp.Header.Del("X-Amz-Crc32")
				resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
				resp.ContentLength, resp.Body = int64(len(body)), io.NopCloser(strings.NewReader(body))
				return nil
			}
			srv := httptest.NewServer(proxy)
			defer srv.Close()

			var counter testenv.Counter
			client := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
				o.BaseEndpoint = aws.String(srv.URL)
				o.Retryer = fastRetryer(3)
				o.APIOptions = append(o.APIOptions, counter.Middleware)
			})
			store := dynamostore.New(client, testenv.NewTable(t, testenv.DynamoClient(endpoint, nil)))
			for _, rec := range []recordstore.Record{
				pending(idempotency.NewID("t", "lost-pending"), "c1", "fp", `{"a":1}`),
				inProgress(idempotency.NewID("t", "lost-in-progress"), "c1", "fp"),
			} {
				counter.Reset()
				before := dropped.Load()
				res, err := store.ClaimRecord(ctx, rec)
				if err != nil || res.Replayed || res.Record.ClaimID != "c1" || res.Record.State != rec.State {
					t.Errorf("%s claim: %+v, %v; want the claim itself", rec.State, res, err)
				}
				if dropped.Load() != before+1 {
					t.Fatalf("%s claim: no answer was dropped; the lost answer is not exercised", rec.State)
				}
				if got := counter.Ops(); !maps.Equal(got, server.want) {
					t.Errorf("%s claim sent %v, want %v", rec.State, got, server.want)
				}
				if got, err := store.GetRecord(ctx, rec.ID); err != nil || got.ClaimID != "c1" || got.State != rec.State {
					t.Errorf("%s claim stored %+v, %v", rec.State, got, err)
				}
			}
		})
	}
}

// What the SDK's client really returns after its retries is classified as
// the store's callers need: unavailable (a 503 for the API's clients) for
// throttles, 5xx, 429, an exhausted retry quota and a deadline, after the
// client retried them; not for client errors, which it does not retry.
func TestClientErrorsAreClassified(t *testing.T) {
	const attempts = 3
	cases := []struct {
		name        string
		status      int
		body        string
		unavailable bool
		retryer     func() aws.Retryer // the client's, if not fastRetryer(attempts)
		sent        int                // attempts the server sees
	}{
		{name: "throttled throughout", status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"slow down"}`, unavailable: true, sent: attempts},
		{name: "provisioned throughput exceeded throughout", status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}`, unavailable: true, sent: attempts},
		{name: "request limit exceeded throughout", status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#RequestLimitExceeded","message":"account limit"}`, unavailable: true, sent: attempts},
		{name: "server errors throughout", status: 500, body: `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}`, unavailable: true, sent: attempts},
		{name: "503 without a body", status: 503, body: ``, unavailable: true, sent: attempts},
		{name: "429 from a proxy", status: 429, body: `rate limited`, unavailable: true, sent: attempts},
		{
			// A retry quota with room for one retry of a throttle (5
			// tokens), not two: the client stops early, and says why.
			name: "retry quota exhausted", status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException"}`, unavailable: true, sent: 2,
			retryer: func() aws.Retryer {
				return fastRetryer(attempts, func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.NewTokenRateLimit(9) })
			},
		},
		{name: "validation", status: 400, body: `{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}`, unavailable: false, sent: 1},
		{name: "missing table", status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"}`, unavailable: false, sent: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sent atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent.Add(1)
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			retryer := tc.retryer
			if retryer == nil {
				retryer = func() aws.Retryer { return fastRetryer(attempts) }
			}
			client := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
				o.BaseEndpoint = aws.String(srv.URL)
				o.Retryer = retryer()
			})
			_, err := dynamostore.New(client, "t").Get(context.Background(), idempotency.NewID("t", "k"))
			if got := errors.Is(err, idempotency.ErrUnavailable); got != tc.unavailable {
				t.Errorf("unavailable = %v for %v, want %v", got, err, tc.unavailable)
			}
			if got := sent.Load(); got != int32(tc.sent) {
				t.Errorf("the client sent %d attempts, want %d", got, tc.sent)
			}
			if tc.retryer != nil {
				if !errors.As(err, new(ratelimit.QuotaExceededError)) {
					t.Errorf("%v: want the quota named", err)
				}
			}
		})
	}

	// hang answers nothing until the client hangs up (the server sees it
	// once the body is read), or for long past the test's patience.
	hang := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	t.Run("deadline", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(hang))
		defer srv.Close()
		client := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(srv.URL)
			o.Retryer = fastRetryer(attempts)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := dynamostore.New(client, "t").Get(ctx, idempotency.NewID("t", "k"))
		if !errors.Is(err, idempotency.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want ErrUnavailable for the deadline", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(hang))
		defer srv.Close()
		client := dynamodb.NewFromConfig(testenv.AWSConfig(), func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(srv.URL)
			o.Retryer = fastRetryer(attempts)
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := dynamostore.New(client, "t").Get(ctx, idempotency.NewID("t", "k"))
		if err == nil || errors.Is(err, idempotency.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want the cancellation, not ErrUnavailable", err)
		}
	})
}
