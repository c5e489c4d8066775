package api

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseIdempotencyKey(t *testing.T) {
	t.Parallel()
	valid := "a3f0c9d1-6b0a-4c43"
	cases := []struct {
		in   string
		want string
		err  error
	}{
		{valid, valid, nil},
		{"  " + valid + "\t", valid, nil},
		{`"` + valid + `"`, valid, nil},
		{strings.Repeat("k", 16), strings.Repeat("k", 16), nil},
		{strings.Repeat("k", 255), strings.Repeat("k", 255), nil},
		{`"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255), nil}, // length counted after unquoting
		{"!~" + strings.Repeat("x", 14), "!~" + strings.Repeat("x", 14), nil},
		{"", "", ErrKeyMissing},
		{"   ", "", ErrKeyMissing},
		{strings.Repeat("k", 15), "", ErrKeyInvalid},
		{strings.Repeat("k", 256), "", ErrKeyInvalid},
		{`"` + strings.Repeat("k", 15) + `"`, "", ErrKeyInvalid},
		{`""`, "", ErrKeyInvalid},
		{`"` + valid, "", ErrKeyInvalid},
		{`"abc"def-0123456789"`, "", ErrKeyInvalid},
		{`"abc\def-0123456789"`, "", ErrKeyInvalid},
		{"abc def-0123456789", "", ErrKeyInvalid},
		{"abcdef-0123456789\x00", "", ErrKeyInvalid},
		{"abcdef-0123456789\x7f", "", ErrKeyInvalid},
		{"abcdef-0123456789é", "", ErrKeyInvalid},
		{"abcdef-0123456789,abcdef-0123456789", "", ErrKeyInvalid}, // two headers joined by a proxy
	}
	for _, tc := range cases {
		got, err := ParseIdempotencyKey(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseIdempotencyKey(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// The last part is the remainder; the count rounds up.
func TestPartArithmetic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size, partSize int64
		count          int
		last           int64
	}{
		{1, MinPartSize, 1, 1},
		{MinPartSize, MinPartSize, 1, MinPartSize},
		{MinPartSize + 1, MinPartSize, 2, 1},
		{50 << 20, 5 << 20, 10, 5 << 20},
		{MaxMultipartBytes, MaxPartSize, MaxParts, MaxPartSize},
		// Near 2^63, where size + partSize - 1 would overflow.
		{math.MaxInt64, math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, 1 << 62, 2, math.MaxInt64 - 1<<62},
		{math.MaxInt64, MaxPartSize, int(math.MaxInt64/MaxPartSize + 1), math.MaxInt64 % MaxPartSize},
	} {
		if got := PartCount(tc.size, tc.partSize); got != tc.count {
			t.Errorf("PartCount(%d, %d) = %d, want %d", tc.size, tc.partSize, got, tc.count)
		}
		if got := PartLength(tc.size, tc.partSize, tc.count); got != tc.last {
			t.Errorf("PartLength(%d, %d, last) = %d, want %d", tc.size, tc.partSize, got, tc.last)
		}
		if tc.count > 1 && PartLength(tc.size, tc.partSize, 1) != tc.partSize {
			t.Errorf("PartLength(%d, %d, 1) is not partSize", tc.size, tc.partSize)
		}
	}
}
