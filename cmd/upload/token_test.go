package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceupload/onceupload/pkg/client"
)

// --token-command runs once, its token kept while valid: again when the
// API refused it (FreshToken) or when its JWT exp is a minute away.
func TestTokenCommand(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "n")
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Unix(1_800_000_000, 0)
	expiring := enc([]byte(`{}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"x","exp":%d}`, now.Add(90*time.Second).Unix()))) + ".s"
	s := &tokenSource{command: fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; if [ $n = 3 ]; then echo %[2]s; else echo tok$n; fi`, counter, expiring), now: func() time.Time { return now }}
	ctx := context.Background()
	for i, want := range []string{"tok1", "tok1", "tok1"} {
		if got, err := s.token(ctx); got != want || err != nil {
			t.Fatalf("call %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if got, _ := s.token(client.WithFreshToken(ctx)); got != "tok2" {
		t.Errorf("fresh: %q, want tok2", got)
	}
	if got, _ := s.token(client.WithFreshToken(ctx)); got != expiring {
		t.Errorf("fresh again: %q, want the JWT", got)
	}
	if got, _ := s.token(ctx); got != expiring {
		t.Errorf("cached JWT: %q", got)
	}
	now = now.Add(31 * time.Second) // exp is less than a minute away
	if got, _ := s.token(ctx); got != "tok4" {
		t.Errorf("near exp: %q, want tok4 (run again)", got)
	}

	bad := &tokenSource{command: "echo oops >&2; exit 3"}
	if _, err := bad.token(ctx); err == nil || !strings.Contains(err.Error(), "--token-command") || !strings.Contains(err.Error(), "oops") {
		t.Errorf("failing command: %v", err)
	}
	if _, err := (&tokenSource{command: "true"}).token(ctx); err == nil {
		t.Error("a command that prints nothing gave a token")
	}
}

// --token-file is read again for every request.
func TestTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	s := &tokenSource{file: p}
	if _, err := s.token(context.Background()); err == nil {
		t.Error("a missing file gave a token")
	}
	for _, tok := range []string{"one", "two"} {
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := s.token(context.Background()); got != tok || err != nil {
			t.Errorf("%q, %v; want %q", got, err, tok)
		}
	}
}

func TestOneTokenFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{"--token", "a", "--token-file", "f", "x"}, {"--token-command", "c", "--token-file", "f", "x"}} {
		errOut.Reset()
		if code := run(context.Background(), args, &out, &errOut, nil); code != exitUsage || !strings.Contains(errOut.String(), "one of --token") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	if code := run(context.Background(), []string{"--help"}, &out, &errOut, nil); code != exitOK || !strings.Contains(errOut.String(), "with a valid token resumes") {
		t.Errorf("--help does not say that a rerun with a new token resumes: %q", errOut.String())
	}
}

// A JWT is fetched again in its last minute; when the command fails then
// (its token service is unreachable: the network is down for a moment),
// the token it gave, still valid, goes on being used rather than ending
// the run. Once it has expired, or when the API refused it, the failure
// is the command's.
func TestTokenCommandFailingBeforeExpiry(t *testing.T) {
	dir := t.TempDir()
	enc := base64.RawURLEncoding.EncodeToString
	jwt := func(exp time.Time) string {
		return enc([]byte(`{}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"x","exp":%d}`, exp.Unix()))) + ".s"
	}
	// The command works once, then cannot reach its service.
	once := func(token string) string {
		marker := filepath.Join(t.TempDir(), "ran")
		return fmt.Sprintf(`if [ -e %[1]q ]; then echo "Could not connect to the endpoint URL" >&2; exit 255; fi; touch %[1]q; echo %[2]s`, marker, token)
	}

	t.Run("a run", func(t *testing.T) {
		f := newReplayAPI(t, "store")
		var out, errOut bytes.Buffer
		args := []string{"--api", f.srv.URL, "--state", filepath.Join(dir, "s.json"), "--quiet", "--token-command", once(jwt(time.Now().Add(50 * time.Second))), tempFile(t, 100)}
		if code := run(context.Background(), args, &out, &errOut, nil); code != exitOK {
			t.Errorf("exit %d, stderr %q; want %d: the token was still valid", code, errOut.String(), exitOK)
		}
	})

	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(50 * time.Second)
	s := &tokenSource{command: once(jwt(exp)), now: func() time.Time { return now }}
	ctx := context.Background()
	for i := range 2 {
		if got, err := s.token(ctx); got != jwt(exp) || err != nil {
			t.Fatalf("call %d, exp 50 s away: %q, %v; want the JWT", i, got, err)
		}
	}
	if _, err := s.token(client.WithFreshToken(ctx)); err == nil || !strings.Contains(err.Error(), "Could not connect") {
		t.Errorf("asked for a fresh one: %v; want the command's failure", err)
	}
	now = exp
	if _, err := s.token(ctx); err == nil || !strings.Contains(err.Error(), "Could not connect") {
		t.Errorf("expired: %v; want the command's failure", err)
	}
}
