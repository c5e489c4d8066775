// Package keyheader parses the Idempotency-Key request header, one rule for
// every server in this module: the upload API (through pkg/api, at least
// 16 characters) and the API Gateway wrapper (pkg/idempotency/apigateway,
// at least 1). It imports nothing beyond the standard library, so a client
// that checks a key links no store.
//
// The rule: surrounding spaces and tabs are not part of the value; a value
// wrapped in double quotes (the IETF draft's structured-field string,
// "...") is unquoted once, and a double quote or backslash inside it is
// refused (a structured-field string would escape them, and no escape is
// read); what remains is minLen to [MaxLen] visible ASCII characters (0x21
// to 0x7E) other than a comma. A comma is refused so that two headers
// joined by a proxy ("a, b") never make a new key.
package keyheader

import (
	"errors"
	"strings"
)

// MaxLen bounds a key, in characters, counted after unquoting.
const MaxLen = 255

var (
	// ErrMissing: the value is empty or only spaces and tabs.
	ErrMissing = errors.New("keyheader: no Idempotency-Key")
	// ErrMalformed: the value breaks the rule.
	ErrMalformed = errors.New("keyheader: malformed Idempotency-Key")
)

// Parse returns the key an Idempotency-Key header value carries, at least
// minLen characters long: ErrMissing for a blank value, ErrMalformed for
// one that breaks the rule (see the package documentation).
func Parse(value string, minLen int) (string, error) {
	k := strings.Trim(value, " \t")
	if k == "" {
		return "", ErrMissing
	}
	if k[0] == '"' {
		if len(k) < 2 || k[len(k)-1] != '"' {
			return "", ErrMalformed
		}
		k = k[1 : len(k)-1]
		if strings.ContainsAny(k, `"\`) {
			return "", ErrMalformed
		}
	}
	if len(k) < max(minLen, 1) || len(k) > MaxLen {
		return "", ErrMalformed
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e || k[i] == ',' {
			return "", ErrMalformed
		}
	}
	return k, nil
}
