package devstack

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// The template's stream filter, read as the stack reads it, passes the
// changes into a final state and nothing else.
func TestTemplateStreamFilter(t *testing.T) {
	spec, err := LoadSpec(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Stream == nil || len(spec.Stream.Filters) == 0 || spec.Stream.MaxRetries < 0 || !spec.Stream.ReportBatchItemFailures {
		t.Fatalf("stream spec %+v: want a filtered function with finite retries that reports the records that failed", spec.Stream)
	}
	for raw, want := range map[string]bool{
		`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"S":"completed"}},"OldImage":{"state":{"S":"pending"}}}}`: true,
		`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"S":"aborted"}}}}`:                                        true,
		`{"eventName":"INSERT","dynamodb":{"NewImage":{"state":{"S":"in_progress"}}}}`:                                    false,
		`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"S":"pending"}}}}`:                                        false,
		`{"eventName":"REMOVE","dynamodb":{"OldImage":{"state":{"S":"completed"}}}}`:                                      false,
		`{"eventName":"MODIFY","dynamodb":{"NewImage":{"state":{"N":"1"}}}}`:                                              false,
	} {
		var ev map[string]any
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatal(err)
		}
		got := false
		for _, f := range spec.Stream.Filters {
			got = got || matchPattern(f, ev)
		}
		if got != want {
			t.Errorf("%s: passes %v, want %v", raw, got, want)
		}
	}
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
