package idempotency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

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

// lookup resolves a dotted path in v; ok is false when it leads nowhere or
// to null. An empty path is v itself.
func lookup(v any, path string) (any, bool) {
	if path != "" {
		for _, seg := range strings.Split(path, ".") {
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

// keyAt is the idempotency key found at path in doc, or ErrMissingKey.
func keyAt(doc any, path string) (string, error) {
	v, ok := lookup(doc, path)
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

// fingerprintText is the canonical text of the parts of doc at paths, in
// order (null for a part that is absent), or of the whole doc.
func fingerprintText(doc any, paths []string) (string, error) {
	if len(paths) == 0 {
		return canonical(doc)
	}
	parts := make([]any, len(paths))
	for i, p := range paths {
		parts[i], _ = lookup(doc, p)
	}
	return canonical(parts)
}
