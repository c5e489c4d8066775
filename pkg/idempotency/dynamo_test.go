package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/awslite"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// TestRoundTrips counts the HTTP calls each operation sends to a real local
// DynamoDB: the design's budget is exactly one each.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(sharedDynoxide(t), nil)
	store := idempotency.NewDynamoStore(testenv.LiteDynamo(sharedDynoxide(t), &counter), testenv.NewTable(t, client))
	id := idempotency.NewID("t", "round-trips")

	steps := []struct {
		name string
		run  func() error
		want map[string]int
	}{
		{"claim", func() error { _, err := store.Claim(ctx, pending(id, "c1", "fp", `{}`)); return err }, map[string]int{"PutItem": 1}},
		{"replay", func() error {
			res, err := store.Claim(ctx, pending(id, "c2", "fp", `{}`))
			if err == nil && !res.Replayed {
				err = errors.New("not a replay")
			}
			return err
		}, map[string]int{"PutItem": 1}},
		{"reuse", func() error {
			if _, err := store.Claim(ctx, pending(id, "c2", "other", `{}`)); !errors.Is(err, idempotency.ErrKeyReused) {
				return fmt.Errorf("want ErrKeyReused, got %v", err)
			}
			return nil
		}, map[string]int{"PutItem": 1}},
		{"get", func() error { _, err := store.Get(ctx, id); return err }, map[string]int{"GetItem": 1}},
		{"complete", func() error {
			_, err := store.Update(ctx, id, "c1", idempotency.Update{State: idempotency.StateCompleted})
			return err
		}, map[string]int{"UpdateItem": 1}},
		{"duplicate completion", func() error {
			_, err := store.Update(ctx, id, "c1", idempotency.Update{State: idempotency.StateCompleted})
			if !errors.Is(err, idempotency.ErrAlreadyCompleted) {
				return fmt.Errorf("want ErrAlreadyCompleted, got %v", err)
			}
			return nil
		}, map[string]int{"UpdateItem": 1}},
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
	store := idempotency.NewDynamoStore(testenv.LiteDynamo(sharedDynalite(t), &counter), testenv.NewTable(t, client))
	id := idempotency.NewID("t", "fallback")

	// Prove the server really ignores ALL_OLD, or this test proves nothing.
	if _, err := store.Claim(ctx, pending(id, "c1", "fp", `{"first":true}`)); err != nil {
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
	res, err := store.Claim(ctx, pending(id, "c2", "fp", `{}`))
	if err != nil || !res.Replayed || string(res.Record.Response.Body) != `{"first":true}` {
		t.Fatalf("replay = %+v, %v", res, err)
	}
	if got, want := counter.Ops(), map[string]int{"PutItem": 1, "GetItem": 1}; !maps.Equal(got, want) {
		t.Errorf("replay sent %v, want %v", got, want)
	}
	if _, err := store.Claim(ctx, pending(id, "c3", "other", `{}`)); !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("reuse through the fallback: %v, want ErrKeyReused", err)
	}
}

// TestClaimRace: 200 goroutines claim one key at once on a real server.
// Exactly one wins; every other sees a replay of the winner's claim.
func TestClaimRace(t *testing.T) {
	ctx := context.Background()
	client := testenv.DynamoClient(sharedDynoxide(t), nil)
	store := idempotency.NewDynamoStore(testenv.LiteDynamo(sharedDynoxide(t), nil), testenv.NewTable(t, client))
	id := idempotency.NewID("t", "race")

	const n = 200
	var wg sync.WaitGroup
	results := make([]idempotency.ClaimResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = store.Claim(ctx, pending(id, fmt.Sprintf("claim-%d", i), "fp", fmt.Sprintf(`{"i":%d}`, i)))
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

func (f fakeDynamo) PutItem(context.Context, *awslite.PutItemInput) (*awslite.PutItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) GetItem(context.Context, *awslite.GetItemInput) (*awslite.GetItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) UpdateItem(context.Context, *awslite.UpdateItemInput) (*awslite.UpdateItemOutput, error) {
	return nil, f.err
}
func (f fakeDynamo) DeleteItem(context.Context, *awslite.DeleteItemInput) (*awslite.DeleteItemOutput, error) {
	return nil, f.err
}

func TestErrorsAreClassified(t *testing.T) {
	cases := []struct {
		err         error
		unavailable bool
	}{
		{&awslite.Error{StatusCode: 400, Code: "ProvisionedThroughputExceededException"}, true},
		{&awslite.Error{StatusCode: 400, Code: "ThrottlingException"}, true},
		{&awslite.Error{StatusCode: 400, Code: "RequestLimitExceeded"}, true},
		{&awslite.Error{StatusCode: 500, Code: "InternalServerError"}, true},
		{&awslite.Error{StatusCode: 503, Code: "ServiceUnavailable"}, true},
		{&smithy.GenericAPIError{Code: "ServiceUnavailable", Fault: smithy.FaultServer}, true},
		{context.DeadlineExceeded, true},
		{&awslite.Error{StatusCode: 400, Code: "ResourceNotFoundException"}, false},
		{&smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient}, false},
		{errors.New("boom"), false},
	}
	ctx := context.Background()
	id := idempotency.NewID("t", "k")
	for _, tc := range cases {
		store := idempotency.NewDynamoStore(fakeDynamo{err: tc.err}, "table")
		_, claimErr := store.Claim(ctx, pending(id, "c", "fp", `{}`))
		_, getErr := store.Get(ctx, id)
		_, updErr := store.Update(ctx, id, "c", idempotency.Update{State: idempotency.StateCompleted})
		relErr := store.Release(ctx, id, "c")
		for op, err := range map[string]error{"claim": claimErr, "get": getErr, "update": updErr, "release": relErr} {
			if err == nil || !errors.Is(err, tc.err) {
				t.Errorf("%s with %T: %v does not wrap the cause", op, tc.err, err)
			}
			if got := errors.Is(err, idempotency.ErrUnavailable); got != tc.unavailable {
				t.Errorf("%s with %T: unavailable = %v, want %v", op, tc.err, got, tc.unavailable)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestMakeIdempotentRoundTrips counts the calls the wrapper sends to a real
// local DynamoDB, as docs/idempotency.md states them: two writes for a
// fresh request, one for a replay, two for a failure.
func TestMakeIdempotentRoundTrips(t *testing.T) {
	ctx := context.Background()
	var counter testenv.Counter
	client := testenv.DynamoClient(sharedDynoxide(t), nil)
	store := idempotency.NewDynamoStore(testenv.LiteDynamo(sharedDynoxide(t), &counter), testenv.NewTable(t, client))
	fail := errors.New("declined")
	call := idempotency.MakeIdempotent(store, func(_ context.Context, req map[string]string) (string, error) {
		if req["fail"] != "" {
			return "", fail
		}
		return "ok", nil
	}, func(o *idempotency.HandlerOptions[map[string]string, string]) { o.KeyPath = "key" })

	steps := []struct {
		name    string
		req     map[string]string
		wantErr error
		want    map[string]int
	}{
		{"fresh", map[string]string{"key": "k-1"}, nil, map[string]int{"PutItem": 1, "UpdateItem": 1}},
		{"replay", map[string]string{"key": "k-1"}, nil, map[string]int{"PutItem": 1}},
		{"reuse", map[string]string{"key": "k-1", "other": "x"}, idempotency.ErrKeyReused, map[string]int{"PutItem": 1}},
		{"failure", map[string]string{"key": "k-2", "fail": "y"}, fail, map[string]int{"PutItem": 1, "DeleteItem": 1}},
	}
	for _, step := range steps {
		counter.Reset()
		if _, err := call(ctx, step.req); !errors.Is(err, step.wantErr) {
			t.Fatalf("%s: err = %v, want %v", step.name, err, step.wantErr)
		}
		if got := counter.Ops(); !maps.Equal(got, step.want) {
			t.Errorf("%s sent %v, want %v", step.name, got, step.want)
		}
	}
}

// vanishingHolder fails the first conditional put as a held key whose
// holder is gone by the time it is read (no item comes back), then lets the
// second put through; it records the lease each put wrote.
type vanishingHolder struct {
	fakeDynamo
	puts   int
	leases []string
}

func (v *vanishingHolder) PutItem(_ context.Context, in *awslite.PutItemInput) (*awslite.PutItemOutput, error) {
	v.puts++
	if n := in.Item["lease_expires_at"].N; n != nil {
		v.leases = append(v.leases, *n)
	}
	if v.puts == 1 {
		return nil, &awslite.Error{StatusCode: 400, Code: "ConditionalCheckFailedException"}
	}
	return &awslite.PutItemOutput{}, nil
}

func (v *vanishingHolder) GetItem(context.Context, *awslite.GetItemInput) (*awslite.GetItemOutput, error) {
	return &awslite.GetItemOutput{}, nil
}

// The claim's second attempt keeps the lease the caller asked for (a
// function's remaining time), not the store's default.
func TestClaimRetryKeepsTheCallersLease(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	client := &vanishingHolder{}
	s := idempotency.NewDynamoStore(client, "t", func(o *idempotency.Options) { o.Now = func() time.Time { return now } })
	res, err := s.Claim(context.Background(), idempotency.Record{
		ID: idempotency.NewID("t", "k"), ClaimID: "c", Fingerprint: "f", State: idempotency.StateInProgress, Lease: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatInt(now.Add(10*time.Minute).UnixMilli(), 10)
	if len(client.leases) != 2 || client.leases[0] != want || client.leases[1] != want || !res.Record.LeaseExpiresAt.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("leases written %v, returned %s; want both %s", client.leases, res.Record.LeaseExpiresAt, want)
	}
}

// echoOwnWrite fails the first put as a held key whose holder is the item
// being put: the put was written, its answer lost, and the retry met it.
type echoOwnWrite struct {
	fakeDynamo
	puts int
}

func (e *echoOwnWrite) PutItem(_ context.Context, in *awslite.PutItemInput) (*awslite.PutItemOutput, error) {
	e.puts++
	body, _ := json.Marshal(map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", "Item": in.Item})
	return nil, &awslite.Error{StatusCode: 400, Code: "ConditionalCheckFailedException", Body: body}
}

// A claim that meets its own write (a retried put whose first answer was
// lost) is the claim, not a replay and not someone else's claim in
// progress, which would block the key for the lease.
func TestClaimThatMeetsItsOwnWrite(t *testing.T) {
	for _, rec := range []idempotency.Record{
		pending(idempotency.NewID("t", "own-pending"), "c1", "fp", `{"a":1}`),
		inProgress(idempotency.NewID("t", "own-in-progress"), "c1", "fp"),
	} {
		client := &echoOwnWrite{}
		res, err := idempotency.NewDynamoStore(client, "t").Claim(context.Background(), rec)
		if err != nil || res.Replayed || res.Record.ClaimID != "c1" {
			t.Errorf("%s claim: %+v, %v; want the claim itself", rec.State, res, err)
		}
	}
}

// What the client really returns after its retries is classified as the
// store's callers need: unavailable (a 503 for the API's clients) for
// throttles, 5xx, 429 and exhausted retries, not for client errors.
func TestClientErrorsAreClassified(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		body        string
		unavailable bool
	}{
		{"throttled throughout", 400, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException"}`, true},
		{"server errors throughout", 500, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}`, true},
		{"503 without a body", 503, ``, true},
		{"429 from a proxy", 429, `rate limited`, true},
		{"validation", 400, `{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}`, false},
		{"missing table", 400, `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			cfg := testenv.AWSConfig()
			cfg.Retryer = func() aws.Retryer {
				return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts, o.MaxBackoff = 2, time.Millisecond })
			}
			client, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) { o.BaseEndpoint = srv.URL })
			if err != nil {
				t.Fatal(err)
			}
			_, err = idempotency.NewDynamoStore(client, "t").Get(context.Background(), idempotency.NewID("t", "k"))
			if got := errors.Is(err, idempotency.ErrUnavailable); got != tc.unavailable {
				t.Errorf("unavailable = %v for %v, want %v", got, err, tc.unavailable)
			}
		})
	}
}
