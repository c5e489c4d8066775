package devstack

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
)

// signedHeaders are the headers the service tells a client to send with
// its PUTs, signed by the SDK's presigner: a single PUT's, then a part's.
func signedHeaders(t *testing.T) map[string]map[string]string {
	t.Helper()
	ctx := context.Background()
	client := s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	svc := upload.New(memorystore.New(), upload.NewPresigner(client, "uploads-test"), &s3fake.Client{},
		upload.Config{Bucket: "uploads-test", Prefix: "uploads/", PresignTTL: 15 * time.Minute, MaxUploadBytes: 1 << 30},
		func(o *upload.Options) { o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	sum := strings.Repeat("ab", 32)
	single, err := svc.Create(ctx, "tenant", "signed-headers-key-1", api.CreateRequest{Filename: "a.txt", ContentType: "text/plain", Size: 10, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	multi, err := svc.Create(ctx, "tenant", "signed-headers-key-2", api.CreateRequest{Filename: "b.bin", ContentType: "application/octet-stream", Size: 6 << 20, SHA256: sum, PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := svc.SignParts(ctx, "tenant", multi.UploadID, api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: 1, SHA256: sum}}})
	if err != nil {
		t.Fatal(err)
	}
	var u api.Upload
	var sp api.SignedParts
	if err := json.Unmarshal(single.Body, &u); err != nil || u.Upload == nil {
		t.Fatalf("single PUT body %s: %v", single.Body, err)
	}
	if err := json.Unmarshal(parts.Body, &sp); err != nil || len(sp.Parts) != 1 {
		t.Fatalf("signed parts %s: %v", parts.Body, err)
	}
	return map[string]map[string]string{"single PUT": u.Upload.Headers, "part": sp.Parts[0].Headers}
}

// bucketPutHeaders are the headers template.yaml's bucket CORS allows on
// PUT, lower case.
func bucketPutHeaders(t *testing.T) []string {
	t.Helper()
	spec, err := LoadSpec(filepath.Join("..", "..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, r := range spec.Bucket.CORSRules {
		if slices.Contains(r.AllowedMethods, "PUT") {
			for _, h := range r.AllowedHeaders {
				allowed = append(allowed, strings.ToLower(h))
			}
		}
	}
	return allowed
}

// Every header the server signs, and so tells a browser to send, is one
// the bucket's CORS rule allows: otherwise the browser's preflight fails
// and the upload never starts. Against template.yaml, which a deployment
// and the local stack both apply.
func TestBucketCORSAllowsEverySignedHeader(t *testing.T) {
	allowed := bucketPutHeaders(t)
	for kind, headers := range signedHeaders(t) {
		if len(headers) == 0 {
			t.Fatalf("%s: no headers listed", kind)
		}
		for name := range headers {
			if !slices.Contains(allowed, strings.ToLower(name)) && !slices.Contains(allowed, "*") {
				t.Errorf("%s: the URL signs %s, which the bucket's CORS rule %v does not allow", kind, name, allowed)
			}
		}
	}
	if single := signedHeaders(t)["single PUT"]; single["If-None-Match"] != "*" {
		t.Errorf("single PUT headers %v: want If-None-Match: * (a URL never overwrites)", single)
	}
}

// The local stack's bucket answers a browser's preflight for exactly the
// headers the API lists for a PUT, and the PUT with them stores the object
// once.
func TestBucketPreflightForTheListedHeaders(t *testing.T) {
	st := startStack(t, false)
	content := []byte("preflighted")
	created := call(t, "POST", st.APIURL+"/uploads", "preflight-key-00001", createBody(content))
	var u api.Upload
	if created.status != 201 || json.Unmarshal(created.body, &u) != nil || u.Upload == nil {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	var names []string
	for name := range u.Upload.Headers {
		names = append(names, strings.ToLower(name))
	}
	sort.Strings(names)
	if !slices.Contains(names, "if-none-match") {
		t.Fatalf("listed headers %v: want if-none-match", names)
	}
	preflight := func(headers []string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", u.Upload.URL, nil)
		req.Header.Set("Origin", "http://localhost:5173")
		req.Header.Set("Access-Control-Request-Method", "PUT")
		req.Header.Set("Access-Control-Request-Headers", strings.Join(headers, ","))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight(names)
	allowHeaders := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	if resp.StatusCode >= 300 || resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Fatalf("preflight for %v: %d %v", names, resp.StatusCode, resp.Header)
	}
	for _, name := range names {
		if allowHeaders != "*" && !strings.Contains(allowHeaders, name) {
			t.Errorf("preflight allows %q, not %s", allowHeaders, name)
		}
	}
	for i, want := range []int{http.StatusOK, http.StatusPreconditionFailed} {
		put, _ := http.NewRequest("PUT", u.Upload.URL, strings.NewReader(string(content)))
		for k, v := range u.Upload.Headers {
			put.Header.Set(k, v)
		}
		put.Header.Set("Origin", "http://localhost:5173")
		resp, err := http.DefaultClient.Do(put)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("PUT %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	testenv.SkipOnS3(t, services.MinIO, "its CORS is server-wide and allows every request header: no bucket rule lists them")
	// The bucket does check the headers: one it does not allow is refused.
	if resp := preflight([]string{"x-not-allowed"}); resp.StatusCode < 300 && resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight for a header the rule does not allow: %d %v", resp.StatusCode, resp.Header)
	}
}
