package keyheader

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	key := "a3f0c9d1-6b0a-4c43"
	for _, tc := range []struct {
		in     string
		minLen int
		want   string
		err    error
	}{
		{key, 16, key, nil},
		{" \t" + key + "\t ", 16, key, nil},
		{`"` + key + `"`, 16, key, nil},
		{"k", 1, "k", nil},
		{`"k"`, 1, "k", nil},
		{"k", 0, "k", nil}, // a minimum under one is one
		{strings.Repeat("k", MaxLen), 16, strings.Repeat("k", MaxLen), nil},
		{`"` + strings.Repeat("k", MaxLen) + `"`, 1, strings.Repeat("k", MaxLen), nil}, // counted after unquoting
		{"", 1, "", ErrMissing},
		{" \t ", 16, "", ErrMissing},
		{`""`, 0, "", ErrMalformed},
		{`"`, 1, "", ErrMalformed},
		{`"` + key, 1, "", ErrMalformed},
		{strings.Repeat("k", 15), 16, "", ErrMalformed},
		{strings.Repeat("k", MaxLen+1), 1, "", ErrMalformed},
		{key + "," + key, 1, "", ErrMalformed}, // two headers joined by a proxy
		{`a"` + key, 1, `a"` + key, nil},       // a quote or backslash, bare: part of the key
		{`a\` + key, 1, `a\` + key, nil},
		{`"a"` + key + `"`, 1, "", ErrMalformed}, // inside a quoted value: an escape, never read
		{`"a\` + key + `"`, 1, "", ErrMalformed},
		{"a b" + key, 1, "", ErrMalformed},
		{key + "\x7f", 1, "", ErrMalformed},
		{key + "é", 1, "", ErrMalformed},
		{key + "\r\nX-Injected: 1", 1, "", ErrMalformed},
	} {
		got, err := Parse(tc.in, tc.minLen)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("Parse(%q, %d) = %q, %v; want %q, %v", tc.in, tc.minLen, got, err, tc.want, tc.err)
		}
	}
}

// An accepted key parses as itself; quoted too, unless it holds a quote or
// a backslash.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"a3f0c9d1-6b0a-4c43", `"k"`, " k ", `a"b`, `a\b`, "a,b", ""} {
		f.Add(seed, 1)
	}
	f.Fuzz(func(t *testing.T, value string, minLen int) {
		minLen = max(0, min(minLen, MaxLen+1))
		key, err := Parse(value, minLen)
		if err != nil {
			if key != "" || (!errors.Is(err, ErrMissing) && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("Parse(%q) = %q, %v", value, key, err)
			}
			return
		}
		if key[0] != '"' {
			if k, err := Parse(key, minLen); err != nil || k != key {
				t.Fatalf("Parse(%q) = %q, %v; want the key", key, k, err)
			}
		}
		if !strings.ContainsAny(key, `"\`) {
			if k, err := Parse(`"`+key+`"`, minLen); err != nil || k != key {
				t.Fatalf("Parse(quoted %q) = %q, %v; want the key", key, k, err)
			}
		}
	})
}
