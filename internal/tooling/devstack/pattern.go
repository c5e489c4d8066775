package devstack

import (
	"encoding/json"
	"fmt"
)

// parsePattern decodes an event filter pattern (the syntax Lambda's filter
// criteria and EventBridge rules share) and checks that it uses only what
// matchPattern implements: nested objects whose leaves are arrays of
// literal values. Content filters ("anything-but", "prefix", "exists",
// numeric ranges…) are refused here, so a template that starts using one
// fails the stack's start instead of filtering differently from AWS.
func parsePattern(raw string) (map[string]any, error) {
	var p map[string]any
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("filter pattern %q: %w", raw, err)
	}
	if err := checkPattern(p); err != nil {
		return nil, fmt.Errorf("filter pattern %q: %w", raw, err)
	}
	return p, nil
}

func checkPattern(p map[string]any) error {
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			if err := checkPattern(v); err != nil {
				return err
			}
		case []any:
			for _, lit := range v {
				switch lit.(type) {
				case string, float64, bool, nil:
				default:
					return fmt.Errorf("%s: only exact values are supported by the local stack, not %v", k, lit)
				}
			}
		default:
			return fmt.Errorf("%s: want an object or an array of values, not %v", k, v)
		}
	}
	return nil
}

// matchPattern reports whether event (decoded JSON) matches pattern: every
// key of the pattern is in the event, an object matches an object, and an
// array of values matches a value equal to one of them (or an array of
// which some element is).
func matchPattern(pattern, event map[string]any) bool {
	for k, want := range pattern {
		got, ok := event[k]
		if !ok {
			return false
		}
		switch want := want.(type) {
		case map[string]any:
			sub, ok := got.(map[string]any)
			if !ok || !matchPattern(want, sub) {
				return false
			}
		case []any:
			if !matchValues(want, got) {
				return false
			}
		}
	}
	return true
}

func matchValues(want []any, got any) bool {
	if list, ok := got.([]any); ok {
		for _, g := range list {
			if matchValues(want, g) {
				return true
			}
		}
		return false
	}
	for _, w := range want {
		if w == got {
			return true
		}
	}
	return false
}
