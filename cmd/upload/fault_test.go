package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

// noSuchNames makes every DNS look-up of the process (the CLI's transport
// uses the default resolver) find no such name, from a server on
// loopback: no packet leaves the machine.
func noSuchNames(t *testing.T) {
	old := net.DefaultResolver
	net.DefaultResolver = testenv.NXDOMAIN(t)
	t.Cleanup(func() { net.DefaultResolver = old })
}

// connCounter counts the connections a server accepts: one per attempt,
// whatever the server makes of what it gets.
func connCounter(srv *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake errors are the point
	return &n
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := services.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

func hostPort(rawURL string) string {
	return strings.TrimPrefix(strings.TrimPrefix(rawURL, "https://"), "http://")
}

// An --api that is not an absolute http(s) URL is a usage error, before
// any request.
func TestAPIMustBeAnAbsoluteHTTPURL(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1); w.WriteHeader(503) }))
	defer srv.Close()
	for _, bad := range []string{
		hostPort(srv.URL), "localhost:3000", "ftp://" + hostPort(srv.URL), "http://:" + strings.Split(hostPort(srv.URL), ":")[1],
		srv.URL + "/?stage=prod", srv.URL + "#top", "/uploads", "http//" + hostPort(srv.URL),
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--api", bad, "--state", filepath.Join(t.TempDir(), "s.json"), "--max-attempts", "2", "--retry-budget", "1s", tempFile(t, 10)}, &out, &errOut, nil)
		if code != exitUsage || !strings.Contains(errOut.String(), "upload: --api") || requests.Load() != 0 {
			t.Errorf("--api %q: exit %d after %d requests, stderr %q; want %d, no request, a line on --api", bad, code, requests.Load(), errOut.String(), exitUsage)
		}
		requests.Store(0)
	}
}

// Before the API has answered, a failure that waiting cannot fix ends the
// run after its one attempt (the next file is not tried: it would fail the
// same way), exit 1, with one sentence naming the cause and the host and
// no retry; the key minted for it is forgotten (no server saw it).
func TestUnfixableFailuresEndTheRunAtOnce(t *testing.T) {
	noSuchNames(t)
	plain := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	plainConns := connCounter(plain)
	plain.Start()
	defer plain.Close()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	tlsConns := connCounter(tlsSrv)
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	refused := "http://" + freeAddr(t)
	for _, tc := range []struct {
		name, api string
		conns     *atomic.Int32
		want      string
	}{
		{"no such host", "http://nosuchhost.invalid:3000", nil, "upload: no such host nosuchhost.invalid (DNS): check the host in --api (or ONCEUPLOAD_API)\n"},
		{"refused", refused, nil, "upload: nothing answers at " + refused + " (connection refused). Is the API running there? Point the command at yours with --api URL or ONCEUPLOAD_API=URL.\n"},
		{"https to plain HTTP", "https://" + hostPort(plain.URL), plainConns, "upload: " + hostPort(plain.URL) + " speaks plain HTTP, not HTTPS: use http:// in --api (or ONCEUPLOAD_API)\n"},
		{"plain HTTP to TLS", "http://" + hostPort(tlsSrv.URL), tlsConns, "upload: " + hostPort(tlsSrv.URL) + " speaks HTTPS, not plain HTTP: use https:// in --api (or ONCEUPLOAD_API)\n"},
		{"untrusted certificate", tlsSrv.URL, tlsConns, "upload: the certificate of " + hostPort(tlsSrv.URL) +
			" failed verification (x509: certificate signed by unknown authority): check the host in --api (or ONCEUPLOAD_API), or have this system trust the certificate's authority (SSL_CERT_FILE)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.conns != nil {
				tc.conns.Store(0)
			}
			state := filepath.Join(t.TempDir(), "s.json")
			var out, errOut bytes.Buffer
			// A budget, so that a retried failure ends too (as exit 4).
			code := run(context.Background(), []string{"--api", tc.api, "--state", state, "--retry-budget", "2s", tempFile(t, 10), tempFile(t, 20)}, &out, &errOut, nil)
			if code != exitFailed || errOut.String() != tc.want || out.Len() != 0 {
				t.Errorf("exit %d, stderr %q, stdout %q; want %d and stderr %q", code, errOut.String(), out.String(), exitFailed, tc.want)
			}
			if tc.conns != nil && tc.conns.Load() != 1 {
				t.Errorf("%d connections; want one attempt", tc.conns.Load())
			}
			if raw, _ := os.ReadFile(state); strings.Contains(string(raw), `"key"`) {
				t.Errorf("state %s; want no key kept for an API that never answered", raw)
			}
		})
	}
}

// s3Target is the API for one single PUT whose URL (presigned: its query
// holds a signature and a session token) is put, and answers pending to a
// status request.
func s3Target(t *testing.T, put string) string {
	var up api.Upload
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			var req api.CreateRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			up = api.Upload{UploadID: "u1", Status: api.StatusPending, Filename: req.Filename, ContentType: req.ContentType, Bytes: req.Size, SHA256: req.SHA256,
				Upload: &api.PutInstructions{Method: http.MethodPut, URL: put, Headers: map[string]string{"If-None-Match": "*"}}}
			w.WriteHeader(201)
		}
		_ = json.NewEncoder(w).Encode(up)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Whatever fails on the way to S3, no line the command prints, retry
// lines and -v's log included, shows the presigned URL (X-Amz-Signature,
// X-Amz-Security-Token…): the host and the cause instead. A retry line
// names the cause; a certificate that fails verification ends the upload
// at once, though the API has answered.
func TestS3FailuresNeverShowTheURL(t *testing.T) {
	noSuchNames(t)
	const query = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIA%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261201T000000Z&X-Amz-Expires=900&X-Amz-Security-Token=FwoGZXIvYXdzEJr&X-Amz-SignedHeaders=host&X-Amz-Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a close
		}
		conn.Close()
	}))
	defer reset.Close()
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server notices the client leave
		<-r.Context().Done()
	}))
	defer held.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer plain.Close()
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	untrustedConns := connCounter(untrusted)
	untrusted.StartTLS()
	defer untrusted.Close()
	for _, tc := range []struct {
		name, put string
		extra     []string
		exit      int
		says      string
	}{
		{"reset", reset.URL + "/bucket/u1" + query, nil, exitExhausted, "s: no answer from S3 ("},
		{"refused", "http://" + freeAddr(t) + "/bucket/u1" + query, nil, exitExhausted, "s: no answer from S3 (connection refused)\n"},
		{"no such host", "http://bucket.nosuchhost.invalid/u1" + query, nil, exitExhausted, "s: no answer from S3 (no such host)\n"},
		{"https to plain HTTP", "https://" + hostPort(plain.URL) + "/bucket/u1" + query, nil, exitExhausted, "s: no answer from S3 (http: server gave HTTP response to HTTPS client)\n"},
		{"timeout", held.URL + "/bucket/u1" + query, []string{"--deadline", "1s"}, exitExhausted, "context deadline exceeded"},
		{"untrusted certificate", untrusted.URL + "/bucket/u1" + query, nil, exitFailed,
			"S3: the certificate of " + hostPort(untrusted.URL) + " failed verification (x509: certificate signed by unknown authority); waiting does not fix it\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			untrustedConns.Store(0)
			apiURL := s3Target(t, tc.put)
			var out, errOut bytes.Buffer
			args := append([]string{"--api", apiURL, "--state", filepath.Join(t.TempDir(), "s.json"), "-v", "--max-attempts", "2"}, tc.extra...)
			code := run(context.Background(), append(args, tempFile(t, 1<<20)), &out, &errOut, nil)
			printed := out.String() + errOut.String()
			if code != tc.exit || !strings.Contains(printed, tc.says) {
				t.Errorf("exit %d, printed %q; want %d, saying %q", code, printed, tc.exit, tc.says)
			}
			if strings.Contains(strings.ToLower(printed), "x-amz-") || strings.Contains(printed, "FwoGZXIvYXdzEJr") {
				t.Errorf("printed %q: it shows the presigned URL", printed)
			}
			if tc.name == "untrusted certificate" && (untrustedConns.Load() != 1 || strings.Contains(printed, "retrying")) {
				t.Errorf("%d connections, printed %q; want one attempt, no retry", untrustedConns.Load(), printed)
			}
		})
	}
}

// A create whose answer is lost (the server acted on it) and whose next
// attempts are refused (a proxy restarting) may have created its upload:
// the refusals are retried as any network failure, never ended as a wrong
// --api, and the key is kept, so that a rerun resumes the upload the first
// attempt created instead of orphaning it under a new key.
func TestCreateAnswerLostThenRefusedKeepsTheKey(t *testing.T) {
	var seen atomic.Value // the key the create carried
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		seen.Store(r.Header.Get("Idempotency-Key"))
		_ = srv.Listener.Close() // from now on, connections are refused
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the answer is lost
		}
	})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	state := filepath.Join(t.TempDir(), "s.json")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--api", srv.URL, "--state", state, "--max-attempts", "3", "--retry-budget", "5s", tempFile(t, 10)}, &out, &errOut, nil)
	key, _ := seen.Load().(string)
	if key == "" {
		t.Fatalf("exit %d, stderr %q: the create never reached the server", code, errOut.String())
	}
	if code != exitExhausted || strings.Contains(errOut.String(), "Point the command at yours") {
		t.Errorf("exit %d, stderr %q; want %d (retried, then given up), no advice on --api", code, errOut.String(), exitExhausted)
	}
	if raw, _ := os.ReadFile(state); !strings.Contains(string(raw), key) {
		t.Errorf("state %s; want the create's key %s kept, for a rerun to resume its upload", raw, key)
	}
}
