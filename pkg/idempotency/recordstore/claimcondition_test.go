package recordstore_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// acceptedPuts accepts every PutItem and keeps what was sent.
type acceptedPuts struct {
	fakeDynamo
	puts []*dynamodb.PutItemInput
}

func (a *acceptedPuts) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	a.puts = append(a.puts, in)
	return &dynamodb.PutItemOutput{}, nil
}

// The claim's condition is built once for the store's schema: every claim
// sends the same expression on the same names (the schema's, here the
// single-table one with "status", a reserved word), and only the values
// of now change, in the units the record stores them (seconds, millis).
func TestClaimConditionIsBuiltOncePerStore(t *testing.T) {
	c := newClock()
	sent := &acceptedPuts{}
	st := dynamostore.New(sent, "table", func(o *idempotency.Options) { o.Now = c.Now }, singleTable)
	var at []time.Time
	for i := range 2 {
		at = append(at, c.Now())
		mustClaim(t, st, pending(idempotency.NewID("tenant-a", fmt.Sprintf("key-%d", i)), "claim", "fp", `{}`))
		c.Advance(1500 * time.Millisecond)
	}
	first, second := sent.puts[0], sent.puts[1]
	if *first.ConditionExpression != *second.ConditionExpression {
		t.Errorf("conditions differ between claims:\n%s\n%s", *first.ConditionExpression, *second.ConditionExpression)
	}
	if reflect.ValueOf(first.ExpressionAttributeNames).UnsafePointer() != reflect.ValueOf(second.ExpressionAttributeNames).UnsafePointer() {
		t.Errorf("each claim built its own attribute names; want them built once for the store")
	}
	names := slices.Sorted(maps.Values(first.ExpressionAttributeNames))
	if want := []string{"PK", "expiration", "in_progress_expiration", "status"}; !slices.Equal(names, want) {
		t.Errorf("condition names %v, want the schema's %v", names, want)
	}
	for i, put := range sent.puts {
		var got []string
		for _, v := range put.ExpressionAttributeValues {
			switch v := v.(type) {
			case *types.AttributeValueMemberN:
				got = append(got, "N "+v.Value)
			case *types.AttributeValueMemberS:
				got = append(got, "S "+v.Value)
			}
		}
		slices.Sort(got)
		want := []string{"N " + strconv.FormatInt(at[i].UnixMilli(), 10), "N " + strconv.FormatInt(at[i].Unix(), 10), "S " + string(idempotency.StateInProgress)}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("claim %d at %v: condition values %v, want %v", i, at[i], got, want)
		}
	}
}
