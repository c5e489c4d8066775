package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// resolve finds the part of v at p; ok is false when p leads nowhere or to
// null. A segment is the member of that name, else the one member whose
// name matches it ignoring case, or an array index. A string holding a
// JSON object or array is decoded where p goes into it or ends on it.
func (p memberPath) resolve(v any) (any, bool) {
	for _, seg := range p {
		switch node := embedded(v).(type) {
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
	v = embedded(v)
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

// embedded decodes a string that holds a JSON object or array (an API
// Gateway body); any other value comes back unchanged.
func embedded(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	t := strings.TrimSpace(s)
	if t == "" || t[0] != '{' && t[0] != '[' {
		return v
	}
	d, err := decodeJSON([]byte(t))
	if err != nil {
		return v
	}
	return d
}

// normalize replaces, throughout v, every string that holds a JSON object
// or array by its decoded value, so that a body's whitespace and member
// order never reach a key or a fingerprint. It changes v's maps and slices
// in place.
func normalize(v any) any {
	switch node := embedded(v).(type) {
	case map[string]any:
		for k, e := range node {
			node[k] = normalize(e)
		}
		return node
	case []any:
		for i, e := range node {
			node[i] = normalize(e)
		}
		return node
	default:
		return node
	}
}

// canonical is v's JSON, normalized, with object members sorted by name
// (as encoding/json writes maps) and numbers as they were written.
func canonical(v any) (string, error) {
	b, err := json.Marshal(normalize(v))
	if err != nil {
		return "", fmt.Errorf("idempotency: canonical JSON: %w", err)
	}
	return string(b), nil
}

// keyAt is the idempotency key found at the member path in doc, or
// ErrMissingKey; a path that is not a member path is an error of its own,
// never a missing key.
func keyAt(doc any, path string) (string, error) {
	p, err := parseMemberPath(path)
	if err != nil {
		return "", err
	}
	v, ok := p.resolve(doc)
	if !ok {
		return "", ErrMissingKey
	}
	switch k := v.(type) {
	case string:
		return k, nil
	case json.Number:
		return k.String(), nil
	case bool:
		return strconv.FormatBool(k), nil
	default:
		return canonical(k)
	}
}

// fingerprintText is the canonical text of the parts of doc at the member
// paths, in order (null for a part that is absent), or of the whole doc.
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
