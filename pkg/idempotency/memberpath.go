package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A member path names a part of a request's JSON: object members' names
// and array indexes joined by dots, "headers.Idempotency-Key" or
// "body.items.0.sku". It is what HandlerOptions.KeyPath and
// FingerprintPaths hold, and neither JSONPath nor JMESPath:
// docs/idempotency.md says why, and how Powertools' JMESPath expressions
// are written as member paths.
type memberPath []string

// pathReserved are the characters no member path holds: the syntax of
// JMESPath (quoted names, functions, indexes, projections, pipes, literals)
// and of JSONPath. An expression brought from Powertools, such as
// powertools_json(body).orderId or headers."idempotency-key", is refused
// rather than left to find nothing, which with OptionalKey would turn
// idempotency off without a word; and the characters stay free to mean
// something in paths later without changing what a path means now.
const pathReserved = "\"'`()[]{}*?|&@!,"

// parseMemberPath splits path into its segments. "" is the whole request.
func parseMemberPath(path string) (memberPath, error) {
	if path == "" {
		return nil, nil
	}
	if i := strings.IndexAny(path, pathReserved); i >= 0 {
		return nil, fmt.Errorf("idempotency: path %q: %q is reserved; a member path is member names and array indexes joined by dots, such as headers.idempotency-key or body.orderId (it is not JMESPath)", path, path[i])
	}
	segs := strings.Split(path, ".")
	if slices.Contains(segs, "") {
		return nil, fmt.Errorf("idempotency: path %q has an empty segment; a member path is member names and array indexes joined by dots", path)
	}
	return segs, nil
}

// resolve finds the part of doc (as decodeRequest returns it) at p; ok is
// false when p leads nowhere or to null. A segment is the member of that
// name, else the one member whose name matches it ignoring case, or an
// array index. A path goes into a string that holds a JSON object or array
// as into that value: a request's own such strings decodeRequest has
// decoded, and one within their JSON is decoded where p goes into it. The
// part p ends on comes back as it is: an embeddedJSON, or a string as
// written.
func (p memberPath) resolve(doc any) (any, bool) {
	v := doc
	for _, seg := range p {
		node := v
		switch n := v.(type) {
		case embeddedJSON:
			node = n.v
		case string:
			if d, ok := decodeEmbedded(n); ok {
				node = d
			}
		}
		switch node := node.(type) {
		case map[string]any:
			next, ok := node[seg]
			if !ok {
				next, ok = foldMember(node, seg)
			}
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, v != nil
}

// foldMember finds the one member of m whose name equals name ignoring
// case; two such members are ambiguous, and match nothing.
func foldMember(m map[string]any, name string) (any, bool) {
	var found any
	n := 0
	for k, v := range m {
		if strings.EqualFold(k, name) {
			found, n = v, n+1
		}
	}
	return found, n == 1
}

// decodeJSON decodes one JSON value keeping numbers as their text, so that
// canonical re-encoding never rounds them.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// decodeRequest decodes the JSON form of a request (encoding/json's, so
// valid) and replaces each of its strings that holds a JSON object or
// array, such as API Gateway's body, by an embeddedJSON. Strings within
// that JSON stay as they are: they are the body's values.
func decodeRequest(raw []byte) (any, error) {
	doc, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	return embedStrings(doc), nil
}

// embedStrings replaces, throughout v but not within an embeddedJSON,
// every string that holds a JSON object or array by an embeddedJSON. It
// changes v's maps and slices in place.
func embedStrings(v any) any {
	switch node := v.(type) {
	case string:
		if d, ok := decodeEmbedded(node); ok {
			return embeddedJSON{d}
		}
		return node
	case map[string]any:
		for k, e := range node {
			node[k] = embedStrings(e)
		}
		return node
	case []any:
		for i, e := range node {
			node[i] = embedStrings(e)
		}
		return node
	default:
		return node
	}
}

// decodeEmbedded decodes s if it holds one JSON object or array, with JSON
// white space around it at most: an API Gateway body. It must be RFC 7493
// JSON (I-JSON): valid UTF-8, no lone surrogate escape, no member name
// twice. Each of those would decode to a value that other text decodes to
// as well ("\ud800" and "\udfff" both to U+FFFD, {"a":1,"a":2} to
// {"a":2}), so that two bodies would count as one; such a string is left
// as it is, and counts as written.
func decodeEmbedded(s string) (any, bool) {
	t := strings.Trim(s, jsonSpace)
	if t == "" || t[0] != '{' && t[0] != '[' {
		return nil, false
	}
	b := []byte(t)
	if !jsontext.Value(b).IsValid() {
		return nil, false
	}
	d, err := decodeJSON(b)
	return d, err == nil
}

// jsonSpace is JSON's white space (RFC 8259), not Unicode's.
const jsonSpace = " \t\r\n"

// embeddedJSON is a string that held a JSON object or array, decoded. A
// path goes into it as into its value. Its canonical form is a string, the
// canonical text of its value: the body's white space and member order do
// not count, but it never equals that value given as JSON ({"x":"[1]"} is
// not {"x":[1]}), nor a string that is not JSON text.
type embeddedJSON struct{ v any }

// MarshalJSON writes e as a JSON string of its value's canonical JSON.
func (e embeddedJSON) MarshalJSON() ([]byte, error) {
	text, err := json.Marshal(e.v)
	if err != nil {
		return nil, err
	}
	return jsontext.AppendQuote(make([]byte, 0, len(text)+len(text)/4+2), text)
}

// canonical is v's JSON with object members sorted by name (as
// encoding/json writes maps), numbers as they were written, and each
// embeddedJSON a string of its value's canonical JSON.
func canonical(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("idempotency: canonical JSON: %w", err)
	}
	return string(b), nil
}

// keyAt is the idempotency key found at the member path in doc (as
// decodeRequest returns it), or
// ErrMissingKey; a path that is not a member path is an error of its own,
// never a missing key.
func keyAt(doc any, path string) (string, error) {
	p, err := parseMemberPath(path)
	if err != nil {
		return "", err
	}
	v, ok := p.resolve(doc)
	if !ok || namesNothing(v) {
		return "", ErrMissingKey
	}
	switch k := v.(type) {
	case string:
		return k, nil
	case embeddedJSON:
		return canonical(k.v) // the body's canonical JSON, unquoted
	case json.Number:
		return k.String(), nil
	case bool:
		return strconv.FormatBool(k), nil
	default:
		return canonical(k)
	}
}

// namesNothing reports whether v, a key's value, names no request: null,
// an empty string, or an array or object of nothing but nulls (or of
// nothing), given as JSON or as embedded JSON. Each would be one key for
// every request that carries it, so unrelated requests would share a
// record: it is a missing key, as Powertools' throwOnNoIdempotencyKey
// counts it. A nil request, whose whole form is null, is one too.
func namesNothing(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case embeddedJSON:
		return namesNothing(v.v)
	case []any:
		for _, e := range v {
			if e != nil {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if e != nil {
				return false
			}
		}
		return true
	}
	return false
}

// fingerprintText is the canonical text of the parts of doc (as
// decodeRequest returns it) at the member paths, in order (null for a part
// that is absent), or of the whole doc.
func fingerprintText(doc any, paths []string) (string, error) {
	if len(paths) == 0 {
		return canonical(doc)
	}
	parts := make([]any, len(paths))
	for i, path := range paths {
		p, err := parseMemberPath(path)
		if err != nil {
			return "", err
		}
		parts[i], _ = p.resolve(doc)
	}
	return canonical(parts)
}
