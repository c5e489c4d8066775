package bench

import (
	"context"
	"maps"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// The design's round-trip budget, held exactly: this test fails the day any
// path needs one more call. Finalize's budget is one DynamoDB call and the
// one HeadObject that confirms the object.
func TestRoundTripBudget(t *testing.T) {
	dynamoURL, s3URL := testenv.Dynoxide(t), testenv.Versity(t)
	table := testenv.NewTable(t, testenv.DynamoClient(dynamoURL, nil))
	bucket := testenv.NewBucket(t, testenv.S3Client(s3URL, nil))
	rt, err := MeasureRoundTrips(context.Background(), dynamoURL, table, s3URL, bucket)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{
		"create":           {"PutItem": 1},
		"replay-pending":   {"PutItem": 1},
		"replay-completed": {"PutItem": 1},
		"status":           {"GetItem": 1},
		"finalize":         {"HeadObject": 1, "UpdateItem": 1},
		"status-heal":      {"GetItem": 1, "HeadObject": 1, "UpdateItem": 1},
	}
	for path, ops := range want {
		if got := rt.ByPath[path]; !maps.Equal(got, ops) {
			t.Errorf("%s sends %v, budget %v", path, got, ops)
		}
	}
	if line := rt.Line(); line != "round-trips: create=1 replay-pending=1 replay-completed=1 status=1 finalize=1" {
		t.Errorf("report line %q", line)
	}
	if rt.FinalizeS3 != 1 || rt.StatusHeal != 3 {
		t.Errorf("finalize sends %d S3 calls, want its one HeadObject; status-heal %d calls, want 3", rt.FinalizeS3, rt.StatusHeal)
	}
}
