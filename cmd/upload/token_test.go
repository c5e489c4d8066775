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
