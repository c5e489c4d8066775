package devstack

import (
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sttypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// The template's stream filter, read as the stack reads it and applied as
// the poller applies it (stream record, to Lambda's JSON, to the filter),
// passes the changes into a final state and nothing else.
func TestTemplateStreamFilter(t *testing.T) {
	spec, err := LoadSpec(filepath.Join("..", "..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Stream == nil || len(spec.Stream.Filters) == 0 || spec.Stream.MaxRetries < 0 || !spec.Stream.ReportBatchItemFailures {
		t.Fatalf("stream spec %+v: want a filtered function with finite retries that reports the records that failed", spec.Stream)
	}
	s := func(v string) sttypes.AttributeValue { return &sttypes.AttributeValueMemberS{Value: v} }
	state := func(v sttypes.AttributeValue) map[string]sttypes.AttributeValue {
		return map[string]sttypes.AttributeValue{"state": v}
	}
	// Each case is a stream record and, as its name, the part of its
	// Lambda JSON the filter reads.
	cases := []struct {
		raw    string
		name   sttypes.OperationType
		change sttypes.StreamRecord
		want   bool
	}{
		{`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"S":"completed"}},"OldImage":{"state":{"S":"pending"}}}}`,
			sttypes.OperationTypeModify, sttypes.StreamRecord{NewImage: state(s("completed")), OldImage: state(s("pending"))}, true},
		{`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"S":"aborted"}}}}`,
			sttypes.OperationTypeModify, sttypes.StreamRecord{NewImage: state(s("aborted"))}, true},
		{`{"eventName":"INSERT","dynamodb":{"NewImage":{"state":{"S":"in_progress"}}}}`,
			sttypes.OperationTypeInsert, sttypes.StreamRecord{NewImage: state(s("in_progress"))}, false},
		{`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"S":"pending"}}}}`,
			sttypes.OperationTypeModify, sttypes.StreamRecord{NewImage: state(s("pending"))}, false},
		{`{"eventName":"REMOVE","dynamodb":{"OldImage":{"state":{"S":"completed"}}}}`,
			sttypes.OperationTypeRemove, sttypes.StreamRecord{OldImage: state(s("completed"))}, false},
		{`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"N":"1"}}}}`,
			sttypes.OperationTypeModify, sttypes.StreamRecord{NewImage: state(&sttypes.AttributeValueMemberN{Value: "1"})}, false},
	}
	p := &streamPoller{st: &Stack{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}, spec: *spec.Stream,
		arn: "arn:aws:dynamodb:" + Region + ":" + localAccountID + ":table/t/stream/1"}
	var batch []sttypes.Record
	var wantKept []string
	for i, c := range cases {
		seq := strconv.Itoa(i + 1)
		change := c.change
		change.SequenceNumber, change.StreamViewType = aws.String(seq), sttypes.StreamViewTypeNewAndOldImages
		r := sttypes.Record{EventName: c.name, EventID: aws.String(seq), EventSource: aws.String("aws:dynamodb"), Dynamodb: &change}
		batch = append(batch, r)
		if c.want {
			wantKept = append(wantKept, seq)
		}

		// The record's Lambda JSON says what the case's name says.
		ev, err := lambdaRecord(r, p.arn)
		if err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		var lambda, named map[string]any
		if err := remarshal(ev, &lambda); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.raw), &named); err != nil {
			t.Fatal(err)
		}
		if !jsonIncludes(lambda, named) {
			t.Errorf("%s: the record's Lambda JSON is %v", c.raw, lambda)
		}

		got := len(p.filter([]sttypes.Record{r})) == 1
		if got != c.want {
			t.Errorf("%s: passes %v, want %v", c.raw, got, c.want)
		}
	}
	// In one batch, the kept records are the matching ones, in order.
	var kept []string
	for _, ev := range p.filter(batch) {
		kept = append(kept, ev.Change.SequenceNumber)
	}
	if !reflect.DeepEqual(kept, wantKept) {
		t.Errorf("the batch keeps records %v, want %v", kept, wantKept)
	}
}

func remarshal(v any, into any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// jsonIncludes reports whether every field of want is in got with the same
// value, objects compared field by field.
func jsonIncludes(got, want map[string]any) bool {
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		if wm, ok := w.(map[string]any); ok {
			gm, ok := g.(map[string]any)
			if !ok || !jsonIncludes(gm, wm) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			return false
		}
	}
	return true
}

// Content filters the stack does not implement are refused, not ignored.
func TestPatternRefusesContentFilters(t *testing.T) {
	for _, p := range []string{
		`{"dynamodb":{"NewImage":{"state":{"S":[{"anything-but":["pending"]}]}}}}`,
		`{"eventName":"MODIFY"}`,
		`not json`,
	} {
		if _, err := parsePattern(p); err == nil {
			t.Errorf("%s: accepted", p)
		}
	}
	if _, err := parsePattern(`{"a":["x",1,true,null],"b":{"c":["y"]}}`); err != nil {
		t.Errorf("exact values refused: %v", err)
	}
}
