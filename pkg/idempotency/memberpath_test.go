package idempotency

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
)

func TestKeyAt(t *testing.T) {
	event := `{
		"headers": {"Idempotency-Key": "k-1", "x-dup": "a", "X-Dup": "b"},
		"body": "{\"orderId\": \"o-7\", \"amount\": 12.50, \"paid\": true, \"items\": [{\"sku\": \"s-1\"}], \"meta\": {\"b\": 1, \"a\": 2}}",
		"encoded": "eyJvcmRlcklkIjoibyJ9",
		"nothing": null
	}`
	doc, err := decodeRequest([]byte(event))
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
		`{"id":"x","body":" \r\n\t{\"b\":[1,2],\"a\":1}\n"}`,
	}
	var first string
	for i, raw := range same {
		doc, err := decodeRequest([]byte(raw))
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
		{"a body's white space", `{"body":"{\"a\":[1,2]}"}`, `{"body":" { \"a\" : [ 1 , 2 ] }\n"}`, []string{"body"}, true},
		{"a body's member order", `{"body":"{\"a\":1,\"b\":2}"}`, `{"body":"{\"b\":2,\"a\":1}"}`, []string{"body"}, true},
	}
	for _, tc := range pairs {
		var texts [2]string
		for i, raw := range []string{tc.a, tc.b} {
			doc, err := decodeRequest([]byte(raw))
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
	doc, err := decodeRequest([]byte(`{"headers":{"idempotency-key":"k-1"},"body":"{\"orderId\":\"o-7\"}"}`))
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
	// A path error comes before any claim: a store call would panic.
	call := MakeIdempotent(Store(unreachedStore{}), func(context.Context, map[string]any) (string, error) { ran++; return "ok", nil },
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

// A string holding JSON counts as that JSON's canonical text, but as a
// string: never as the same value given as JSON, nor as another string. So
// neither a key nor a fingerprint takes {"x":"[1]"} for {"x":[1]}, under
// the default fingerprint or a path that ends on it, at the top of the
// request or within a body.
func TestEmbeddedJSONCountsAsAString(t *testing.T) {
	fingerprints := func(raw string) map[string]string {
		t.Helper()
		doc, err := decodeRequest([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		texts := map[string]string{}
		for name, paths := range map[string][]string{"whole": nil, "x": {"x"}, "body": {"body"}} {
			if texts[name], err = fingerprintText(doc, paths); err != nil {
				t.Fatal(err)
			}
		}
		return texts
	}
	different := []struct{ name, a, b string }{
		{"an array and a string holding it", `{"x":[1]}`, `{"x":"[1]"}`},
		{"an object and a string holding it", `{"x":{"a":1}}`, `{"x":"{\"a\":1}"}`},
		{"an empty object and a string holding it", `{"x":{}}`, `{"x":"{}"}`},
		{"within a body: an array and a string holding it", `{"body":"{\"x\":[1]}"}`, `{"body":"{\"x\":\"[1]\"}"}`},
		{"a body and the same value given as JSON", `{"body":"{\"a\":1}"}`, `{"body":{"a":1}}`},
		{"a string holding JSON and one holding its canonical text", `{"x":"[1]"}`, `{"x":"\"[1]\""}`},
		{"strings within a body count as written", `{"body":"{\"note\":\"[1, 2]\"}"}`, `{"body":"{\"note\":\"[1,2]\"}"}`},
		{"lone surrogate escapes in a body", `{"body":"{\"a\":\"\\ud800\"}"}`, `{"body":"{\"a\":\"\\udfff\"}"}`},
		{"a lone surrogate escape and U+FFFD", `{"body":"{\"a\":\"\\ud800\"}"}`, `{"body":"{\"a\":\"\\ufffd\"}"}`},
		{"a member twice in a body", `{"body":"{\"a\":1,\"a\":2}"}`, `{"body":"{\"a\":2}"}`},
		{"Unicode space is not JSON's", `{"x":"\u00a0[1]"}`, `{"x":"[1]"}`},
		{"a body with text after it", `{"body":"{} {}"}`, `{"body":"{}"}`},
	}
	for _, tc := range different {
		a, b := fingerprints(tc.a), fingerprints(tc.b)
		for name := range a {
			if a[name] == b[name] && a[name] != "[null]" {
				t.Errorf("%s: fingerprint %s of %s and %s is %s for both", tc.name, name, tc.a, tc.b, a[name])
			}
		}
	}
	same := []struct{ name, a, b string }{
		{"JSON white space around a body", `{"x":"[1]"}`, `{"x":" \t[1]\r\n"}`},
		{"white space within a body", `{"x":"[1,{\"a\":2}]"}`, `{"x":"[ 1, { \"a\": 2 } ]"}`},
		{"escapes within a body", `{"x":"[\"é\"]"}`, `{"x":"[\"\\u00e9\"]"}`},
		{"member order within a body", `{"body":"{\"a\":1,\"b\":{\"c\":3,\"d\":4}}"}`, `{"body":"{\"b\":{\"d\":4,\"c\":3},\"a\":1}"}`},
	}
	for _, tc := range same {
		if a, b := fingerprints(tc.a), fingerprints(tc.b); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: %v, want the same as %v", tc.name, a, b)
		}
	}

	// The canonical text itself: a body is a string of its canonical JSON.
	doc, err := decodeRequest([]byte(`{"body":"{ \"b\": \"[2, 1]\", \"a\": 1.50 }","x":[1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fingerprintText(doc, nil); err != nil || got != `{"body":"{\"a\":1.50,\"b\":\"[2, 1]\"}","x":[1]}` {
		t.Errorf("canonical text %s, %v", got, err)
	}
	// A key that is a whole body is its canonical JSON; a path still goes
	// into a body, and into a string within it.
	doc, err = decodeRequest([]byte(`{"body":"{ \"b\": \"[\\\"k-2\\\"]\", \"a\": 1 }"}`))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"body": `{"a":1,"b":"[\"k-2\"]"}`, "body.b": `["k-2"]`, "body.b.0": "k-2", "body.a": "1"} {
		if got, err := keyAt(doc, path); err != nil || got != want {
			t.Errorf("keyAt(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
}

// unreachedStore is a Store whose every method panics (its embedded Store
// is nil), for a request that must be refused before it reaches one.
type unreachedStore struct{ Store }
