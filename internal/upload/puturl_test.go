package upload

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// TestCompactURL holds compactURL to its promise: what it cuts, expandURL
// gives back byte for byte, and a URL it cannot promise that for is not
// cut (the record then holds it whole).
func TestCompactURL(t *testing.T) {
	const key = "uploads/30e408733e1c780a6f068893022f904fd9877ece6d368aac1a6f419ec627c76b"
	const host = "https://onceupload-b.s3.us-east-1.amazonaws.com/"
	canonical := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xef, 0x3e}, 40)) // '+' and '/' throughout
	token := func(tok string) string {
		return host + key + "?X-Amz-Date=20300102T030405Z&X-Amz-Expires=900&" + tokenParam + url.QueryEscape(tok) + "&X-Amz-Signature=abc"
	}
	for _, tc := range []struct {
		name, url string
		cut       bool
		tokenLen  int // bytes of the token kept as binary
	}{
		{"no token", host + key + "?X-Amz-Date=20300102T030405Z&X-Amz-Signature=abc", true, 0},
		{"path style", "http://127.0.0.1:9000/bucket/" + key + "?X-Amz-Signature=abc", true, 0},
		{"a canonical token", token(canonical), true, 117},
		{"a token with padding", token(canonical[:len(canonical)-4] + "QQ=="), true, 117},
		{"a token whose last quantum has spare bits set", token(canonical[:len(canonical)-4] + "YXR="), true, 117},
		{"a token last in the query", host + key + "?X-Amz-Date=20300102T030405Z&" + tokenParam + url.QueryEscape(canonical), true, 117},
		{"a token that is not base64", token("not*base64*at*all"), false, 0},
		{"an escaped key", host + strings.ReplaceAll(key, "/", "%2F") + "?X-Amz-Signature=abc", false, 0},
		{"a key elsewhere", host + "other/" + key[len("uploads/"):] + "?X-Amz-Signature=abc", false, 0},
		{"no query", host + key, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut, tok, ok := compactURL(tc.url, key)
			if ok != tc.cut {
				t.Fatalf("compactURL(%q) ok = %v, want %v", tc.url, ok, tc.cut)
			}
			if !ok {
				return
			}
			if got := expandURL(cut, tok, key); got != tc.url {
				t.Errorf("expandURL(compactURL(u)) =\n %s\nwant %s", got, tc.url)
			}
			if strings.Contains(cut, key) || len(tok) != tc.tokenLen {
				t.Errorf("cut %q with a token of %d bytes; want the key cut out and %d bytes of token", cut, len(tok), tc.tokenLen)
			}
		})
	}
}
