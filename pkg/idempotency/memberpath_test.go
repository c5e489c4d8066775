package idempotency

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
)

func TestKeyAt(t *testing.T) {
	event := `{
		"headers": {"Idempotency-Key": "k-1", "x-dup": "a", "X-Dup": "b"},
		"body": "{\"orderId\": \"o-7\", \"amount\": 12.50, \"paid\": true, \"items\": [{\"sku\": \"s-1\"}], \"meta\": {\"b\": 1, \"a\": 2}}",
		"encoded": "eyJvcmRlcklkIjoibyJ9",
		"nothing": null
	}`
	doc, err := decodeJSON([]byte(event))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, want string
		missing    bool
	}{
		{path: "headers.Idempotency-Key", want: "k-1"},
		{path: "headers.idempotency-key", want: "k-1"},
		{path: "body.orderId", want: "o-7"},
		{path: "body.amount", want: "12.50"}, // as written, never rounded
		{path: "body.paid", want: "true"},
		{path: "body.items.0.sku", want: "s-1"},
		{path: "body.meta", want: `{"a":2,"b":1}`},
		{path: "headers.x-dup", want: "a"}, // an exact name wins
		{path: "headers.X-DUP", missing: true},
		{path: "body.items.1.sku", missing: true},
		{path: "body.items.x", missing: true},
		{path: "encoded.orderId", missing: true}, // base64 is not decoded
		{path: "nothing", missing: true},
		{path: "absent", missing: true},
		{path: "headers.Idempotency-Key.deeper", missing: true},
	}
	for _, tc := range cases {
		got, err := keyAt(doc, tc.path)
		if tc.missing {
			if !errors.Is(err, ErrMissingKey) {
				t.Errorf("keyAt(%q) = %q, %v; want ErrMissingKey", tc.path, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("keyAt(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
}

func TestFingerprintTextIsCanonical(t *testing.T) {
	same := []string{
		`{"body":"{\"a\":1,\"b\":[1,2]}","id":"x"}`,
		`{"id":"x","body":"{ \"b\": [1, 2],\n \"a\": 1 }"}`,
		`{"id":"x","body":{"b":[1,2],"a":1}}`,
	}
	var first string
	for i, raw := range same {
		doc, err := decodeJSON([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		got, err := fingerprintText(doc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Errorf("fingerprint of %s = %s, want %s", raw, got, first)
		}
	}
	pairs := []struct {
		name      string
		a, b      string
		paths     []string
		wantEqual bool
	}{
		{"another value", `{"a":1}`, `{"a":2}`, []string{"a"}, false},
		{"number text", `{"a":1}`, `{"a":1.0}`, []string{"a"}, false},
		{"only the chosen parts count", `{"a":1,"t":1}`, `{"a":1,"t":2}`, []string{"a"}, true},
		{"absent and null parts", `{"a":null,"b":1}`, `{"b":1}`, []string{"a"}, true},
		{"parts keep their order", `{"a":1,"b":2}`, `{"a":2,"b":1}`, []string{"a", "b"}, false},
	}
	for _, tc := range pairs {
		var texts [2]string
		for i, raw := range []string{tc.a, tc.b} {
			doc, err := decodeJSON([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if texts[i], err = fingerprintText(doc, tc.paths); err != nil {
				t.Fatal(err)
			}
		}
		if (texts[0] == texts[1]) != tc.wantEqual {
			t.Errorf("%s: %s vs %s, want equal: %v", tc.name, texts[0], texts[1], tc.wantEqual)
		}
	}
}

// Powertools' JMESPath expressions, and typos, are refused with an error of
// their own: never a missing key, which with OptionalKey would run every
// request without idempotency.
func TestMemberPathRefusesWhatIsNotOne(t *testing.T) {
	doc, err := decodeJSON([]byte(`{"headers":{"idempotency-key":"k-1"},"body":"{\"orderId\":\"o-7\"}"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		`powertools_json(body).orderId`,
		`headers."idempotency-key"`,
		`[headers."idempotency-key", body]`,
		`body.items[0].sku`,
		`body.items[*].sku`,
		`headers | keys(@)`,
		`body.`,
		`headers..idempotency-key`,
		`.body`,
	} {
		if got, err := keyAt(doc, path); err == nil || errors.Is(err, ErrMissingKey) {
			t.Errorf("keyAt(%q) = %q, %v; want a path error", path, got, err)
		}
		if got, err := fingerprintText(doc, []string{"body", path}); err == nil {
			t.Errorf("fingerprintText(%q) = %q; want a path error", path, got)
		}
	}

	ran := 0
	call := MakeIdempotent(NewMemoryStore(), func(context.Context, map[string]any) (string, error) { ran++; return "ok", nil },
		func(o *HandlerOptions[map[string]any, string]) {
			o.KeyPath, o.OptionalKey = `headers."idempotency-key"`, true
			o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		})
	req := map[string]any{"headers": map[string]any{"idempotency-key": "k-1"}}
	for range 2 {
		if _, err := call(context.Background(), req); err == nil || errors.Is(err, ErrMissingKey) {
			t.Fatalf("a JMESPath KeyPath with OptionalKey: err = %v; want a path error", err)
		}
	}
	if ran != 0 {
		t.Fatalf("the handler ran %d times under a KeyPath that is not a member path", ran)
	}
}
