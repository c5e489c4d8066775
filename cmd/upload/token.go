package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/onceupload/onceupload/pkg/client"
)

// tokenSource gives the bearer token: a fixed string (--token), the output
// of a command (--token-command, run again when the API refused the token
// or it is about to expire), or a file's content (--token-file, read again
// for every request, so whatever renews the file is followed).
type tokenSource struct {
	fixed, command, file string

	mu      sync.Mutex
	cached  string
	expires time.Time // from a JWT's exp claim; zero if unknown
	now     func() time.Time
}

func (s *tokenSource) token(ctx context.Context) (string, error) {
	switch {
	case s.file != "":
		raw, err := os.ReadFile(s.file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		t := strings.TrimSpace(string(raw))
		if t == "" {
			return "", fmt.Errorf("--token-file %s is empty", s.file)
		}
		return t, nil
	case s.command != "":
		s.mu.Lock() // parts in parallel run the command once, not once each
		defer s.mu.Unlock()
		if s.cached != "" && !client.FreshToken(ctx) && (s.expires.IsZero() || s.clock().Add(time.Minute).Before(s.expires)) {
			return s.cached, nil
		}
		t, err := runTokenCommand(ctx, s.command)
		if err != nil {
			if s.cached != "" && !client.FreshToken(ctx) && s.clock().Before(s.expires) {
				// Fetched ahead of its expiry, and the command failed
				// (its service unreachable while the network is down,
				// say): the token in hand still works. It is run again
				// for the next request.
				return s.cached, nil
			}
			return "", err
		}
		s.cached, s.expires = t, jwtExpiry(t)
		return t, nil
	}
	return s.fixed, nil
}

func (s *tokenSource) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// runTokenCommand runs command with the shell and returns what it prints,
// trimmed.
func runTokenCommand(ctx context.Context, command string) (string, error) {
	var cmd *exec.Cmd
	if runtime.GOOS == "windows" {
		cmd = exec.CommandContext(ctx, "cmd", "/C", command)
	} else {
		cmd = exec.CommandContext(ctx, "sh", "-c", command)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg != "" {
			return "", fmt.Errorf("--token-command: %w: %s", err, msg)
		}
		return "", fmt.Errorf("--token-command: %w", err)
	}
	t := strings.TrimSpace(string(out))
	if t == "" {
		return "", errors.New("--token-command printed no token")
	}
	return t, nil
}

// jwtExpiry is the exp claim of a JWT, or zero if t is not one or has none.
func jwtExpiry(t string) time.Time {
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(claims.Exp), 0)
}
