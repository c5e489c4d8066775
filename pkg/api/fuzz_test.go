package api

import (
	"errors"
	"strings"
	"testing"
)

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, seed := range []string{
		"3f0c9d1e-6b0a-4c43-9a55-1b9f1f1e2a77",
		`"3f0c9d1e-6b0a-4c43-9a55-1b9f1f1e2a77"`,
		" \t3f0c9d1e-6b0a-4c43 \t",
		strings.Repeat("k", 15), strings.Repeat("k", 16), strings.Repeat("k", 255), strings.Repeat("k", 256),
		`"` + strings.Repeat("k", 255) + `"`, `"` + strings.Repeat("k", 15) + `"`,
		"", " ", `"`, `""`, `"abcdefghijklmnop`, `abcdefghijklmnop"`, `"abc"defghijklmnop"`, `"abc\defghijklmnop"`,
		"abcdefgh ijklmnop", "abcdefgh\tijklmnop", "abcdefghijklmnop\x7f", "abcdefghijklmnop\x00", "clé-idempotente-0001",
		"abcdefghijklmnop\r\nX-Injected: 1", "abcdefghijklmnop, abcdefghijklmnop",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		key, err := ParseIdempotencyKey(header)
		v := strings.TrimFunc(header, func(r rune) bool { return r == ' ' || r == '\t' })
		switch {
		case err != nil && !errors.Is(err, ErrKeyMissing) && !errors.Is(err, ErrKeyInvalid):
			t.Fatalf("ParseIdempotencyKey(%q): unexpected error %v", header, err)
		case errors.Is(err, ErrKeyMissing) != (v == ""):
			t.Fatalf("ParseIdempotencyKey(%q) = %v; missing must mean blank", header, err)
		case err != nil:
			if key != "" {
				t.Fatalf("ParseIdempotencyKey(%q) refused but returned %q", header, key)
			}
		default:
			if len(key) < MinKeyLen || len(key) > MaxKeyLen || !visibleASCII(key) || strings.Contains(key, ",") {
				t.Fatalf("ParseIdempotencyKey(%q) accepted %q: want %d-%d visible ASCII characters", header, key, MinKeyLen, MaxKeyLen)
			}
			if v != key && v != `"`+key+`"` {
				t.Fatalf("ParseIdempotencyKey(%q) = %q: neither the trimmed value nor its unquoted form", header, key)
			}
			if key[0] != '"' {
				if again, err := ParseIdempotencyKey(key); err != nil || again != key {
					t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; an accepted key must parse as itself", key, again, err)
				}
			}
			if !strings.ContainsAny(key, `"\`) {
				if q, err := ParseIdempotencyKey(" \t\"" + key + "\"\t "); err != nil || q != key {
					t.Fatalf("quoted %q parsed as %q, %v; want the key", key, q, err)
				}
			}
		}

		// What the contract accepts must be accepted: 16-255 visible
		// characters, either bare or wrapped in quotes with no quote or
		// backslash inside.
		want, quoted := v, false
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			want, quoted = v[1:len(v)-1], true
		}
		valid := len(want) >= MinKeyLen && len(want) <= MaxKeyLen && visibleASCII(want) && !strings.Contains(want, ",") &&
			(quoted && !strings.ContainsAny(want, `"\`) || !quoted && v[0] != '"')
		if valid && (err != nil || key != want) {
			t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %q", header, key, err, want)
		}
		if !valid && err == nil {
			t.Fatalf("ParseIdempotencyKey(%q) accepted %q", header, key)
		}
	})
}
