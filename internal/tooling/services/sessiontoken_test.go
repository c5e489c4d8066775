package services

import (
	"net/url"
	"strings"
	"testing"
)

func TestLambdaSessionToken(t *testing.T) {
	tok := LambdaSessionToken()
	if len(tok) != LambdaSessionTokenLength {
		t.Errorf("len = %d, want %d", len(tok), LambdaSessionTokenLength)
	}
	if tok != LambdaSessionToken() {
		t.Error("the token differs between calls; measurements would not repeat")
	}
	if !strings.ContainsAny(tok, "+/") || !strings.HasSuffix(tok, "=") {
		t.Errorf("token lacks the characters URL-encoding widens: %q…", tok[:40])
	}
	if enc := url.QueryEscape(tok); len(enc) <= len(tok) {
		t.Errorf("URL-encoded token is %d bytes, not longer than %d", len(enc), len(tok))
	}
}
