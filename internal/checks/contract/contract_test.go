package contract

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

// spec is the document under test: the repository's own.
var spec = filepath.Join("..", "..", "..", "openapi.yaml")

// Settings of the stack under test, chosen so that every error row of the
// contract can be produced: a maximum size below S3's, and a list of
// allowed content types that leaves some out.
const (
	maxUploadBytes  = 1 << 40 // 1 TiB
	allowedTypes    = "text/*,application/octet-stream,video/*"
	notAllowedType  = "image/png"
	otherTenantJWT  = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.sig" // {"sub":"alice"}, unsigned: the local stack reads claims only
	jwtWithoutSub   = "eyJhbGciOiJub25lIn0.eyJpc3MiOiJtZSJ9.sig"     // {"iss":"me"}
	unknownUploadID = "00000000000000000000000000000000ffffffffffffffffffffffffffffffff"
)

// env is the local stack with two validating proxies in front of its API:
// strict checks requests and responses; lenient checks only responses, for
// requests that break the contract on purpose to see the server's answer.
type env struct {
	st              *devstack.Stack
	strict, lenient *testenv.Proxy
	dynamo          *dynamoSwitch
}

// start starts the stack and the strict proxy, and the lenient one when
// asked.
func start(t *testing.T, lenient bool) *env {
	t.Helper()
	testenv.RequireTools(t, "dynoxide", "versitygw", "prism")
	e := &env{}
	settings := map[string]string{
		"MAX_UPLOAD_BYTES":      strconv.Itoa(maxUploadBytes),
		"ALLOWED_CONTENT_TYPES": allowedTypes,
	}
	st, err := devstack.Start(context.Background(), devstack.Config{
		Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "contract-test", Bucket: "contract-test",
		Env: func(k string) (string, bool) { v, ok := settings[k]; return v, ok },
		FunctionDynamo: func(server string) (string, error) {
			e.dynamo = newDynamoSwitch(t, server)
			return e.dynamo.url, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e.st = st
	e.strict = testenv.ValidatingProxy(t, spec, st.APIURL, testenv.ProxyOptions{})
	if lenient {
		e.lenient = testenv.ValidatingProxy(t, spec, exactBodies(t, st.APIURL), testenv.ProxyOptions{SkipRequestValidation: true})
	}
	return e
}

// TestContract sends the walkthrough, every error row that the local stack
// can produce, and tenant scoping through the validating proxies: each
// exchange must be what the test expects AND what openapi.yaml allows.
func TestContract(t *testing.T) {
	t.Parallel()
	e := start(t, true)
	t.Run("walkthrough", e.walkthrough)
	t.Run("errors", e.errorRows)
	t.Run("tenants", e.tenants)
	t.Run("storage unavailable or failing", e.storageFaults)
	t.Run("multipart", e.multipart)
	t.Run("multipart abort", e.multipartAbort)
	t.Run("multipart errors", e.multipartErrors)
	t.Run("multipart declared at complete", e.multipartDeclared)
	t.Run("complete body errors", e.completeBodyErrors)
	t.Run("multipart create in progress", e.multipartInProgress)
}

// The README's walkthrough: create, replay, 422, PUT, status, completed
// replay.
func (e *env) walkthrough(t *testing.T) {
	content := []byte("hello, exactly once\n")
	const key = "contract-walkthrough-0001"

	first := e.create(t, e.strict, key, createBody("hello.txt", "text/plain", content, 0))
	wantStatus(t, first, 201)
	var u api.Upload
	decode(t, first, &u)
	if loc := first.header.Get("Location"); loc != "/uploads/"+u.UploadID {
		t.Errorf("Location %q, want /uploads/%s", loc, u.UploadID)
	}
	if first.header.Get("Idempotent-Replay") != "" {
		t.Errorf("a first create says Idempotent-Replay: %q", first.header.Get("Idempotent-Replay"))
	}

	replay := e.create(t, e.strict, key, createBody("hello.txt", "text/plain", content, 0))
	wantStatus(t, replay, 201)
	if replay.header.Get("Idempotent-Replay") != "true" || !bytes.Equal(replay.body, first.body) {
		t.Errorf("replay: Idempotent-Replay %q, body\n%s\nwant the first body\n%s", replay.header.Get("Idempotent-Replay"), replay.body, first.body)
	}
	// The same request in another spelling (member order, whitespace, the
	// case of sha256) is the same request.
	sum := sha256.Sum256(content)
	respelled := fmt.Appendf(nil, `{ "sha256": "%s", "size": %d, "contentType": "text/plain", "filename": "hello.txt" }`,
		strings.ToUpper(hex.EncodeToString(sum[:])), len(content))
	wantStatus(t, e.create(t, e.strict, key, respelled), 201)

	reuse := e.create(t, e.strict, key, createBody("other.txt", "text/plain", content, 0))
	wantError(t, reuse, 422, api.CodeKeyReuse)

	if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
		t.Fatalf("PUT to the presigned URL: %d %v", code, err)
	}
	status := e.waitCompleted(t, u.UploadID)
	done := e.create(t, e.strict, key, createBody("hello.txt", "text/plain", content, 0))
	wantStatus(t, done, 201)
	if done.header.Get("Idempotent-Replay") != "true" || !bytes.Equal(done.body, status.body) {
		t.Errorf("completed replay: %v\n%s\nwant the status body\n%s", done.header, done.body, status.body)
	}
}

// Every row of the create table that the local stack can produce, and the
// status route's. Requests that break the contract go through the lenient
// proxy; their answers are still validated.
func (e *env) errorRows(t *testing.T) {
	content := []byte("error rows\n")
	valid := createBody("rows.txt", "text/plain", content, 0)
	key := func(n int) string { return fmt.Sprintf("contract-error-row-%04d", n) }
	// Bodies that Prism would re-encode before forwarding (it parses JSON
	// and writes it again: a member given twice collapses, padding
	// disappears, invalid UTF-8 becomes U+FFFD) reach the server through
	// exactBodies.

	for _, tc := range []struct {
		name   string
		proxy  *testenv.Proxy
		key    string
		body   []byte
		status int
		code   string
	}{
		{"key missing", e.lenient, "", valid, 400, api.CodeKeyRequired},
		{"key too short", e.lenient, "short-key", valid, 400, api.CodeKeyInvalid},
		{"key with a comma (two joined headers)", e.lenient, key(1) + ", " + key(2), valid, 400, api.CodeKeyInvalid},
		{"key quoted with a backslash", e.lenient, `"` + key(3) + `\"`, valid, 400, api.CodeKeyInvalid},
		{"body not an object", e.lenient, key(4), []byte(`[]`), 400, api.CodeInvalidRequest},
		{"body not JSON", e.lenient, key(5), []byte(`{"filename":`), 400, api.CodeInvalidRequest},
		{"sha256 not hex", e.lenient, key(6), []byte(`{"filename":"a.txt","contentType":"text/plain","size":3,"sha256":"xyz"}`), 400, api.CodeInvalidRequest},
		{"size 0", e.lenient, key(7), []byte(`{"filename":"a.txt","contentType":"text/plain","size":0,"sha256":"` + strings.Repeat("a", 64) + `"}`), 400, api.CodeInvalidRequest},
		{"size a fraction", e.lenient, key(8), []byte(`{"filename":"a.txt","contentType":"text/plain","size":1.5,"sha256":"` + strings.Repeat("a", 64) + `"}`), 400, api.CodeInvalidRequest},
		{"filename ..", e.lenient, key(9), createBody("..", "text/plain", content, 0), 400, api.CodeInvalidRequest},
		{"filename with a slash", e.lenient, key(10), createBody("a/b.txt", "text/plain", content, 0), 400, api.CodeInvalidRequest},
		{"contentType a media range", e.lenient, key(11), createBody("a.txt", "text/*", content, 0), 400, api.CodeInvalidRequest},
		{"unknown member", e.lenient, key(12), []byte(strings.Replace(string(valid), `{`, `{"extra":1,`, 1)), 400, api.CodeInvalidRequest},
		{"member name in another case", e.lenient, key(13), []byte(strings.Replace(string(valid), `"filename"`, `"fileName"`, 1)), 400, api.CodeInvalidRequest},
		{"member given twice", e.lenient, key(14), []byte(strings.Replace(string(valid), `{`, `{"size":1,`, 1)), 400, api.CodeInvalidRequest},
		{"invalid UTF-8", e.lenient, key(15), []byte(strings.Replace(string(valid), "rows.txt", "rows\xff.txt", 1)), 400, api.CodeInvalidRequest},
		{"partSize under 5 MiB", e.lenient, key(16), createBody("a.txt", "text/plain", content, 1<<20), 400, api.CodeInvalidRequest},
		{"body over 16 KiB", e.lenient, key(17), append(valid[:len(valid)-1:len(valid)-1], []byte(strings.Repeat(" ", api.MaxBodyBytes)+"}")...), 413, api.CodeRequestTooLarge},
		{"size over MAX_UPLOAD_BYTES", e.strict, key(18), sizedBody(maxUploadBytes+1, api.MaxPartSize), 413, api.CodeFileTooLarge},
		{"over 5 GiB without partSize", e.strict, key(19), sizedBody(api.MaxSinglePutBytes+1, 0), 413, api.CodeFileTooLarge},
		{"contentType not allowed", e.strict, key(20), createBody("a.png", notAllowedType, content, 0), 415, api.CodeUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json"}
			if tc.key != "" {
				h["Idempotency-Key"] = tc.key
			}
			body := tc.body
			if tc.proxy == e.lenient {
				body = exact(h, tc.body)
			}
			wantError(t, e.send(t, tc.proxy, "POST", "/uploads", h, body), tc.status, tc.code)
		})
	}
	t.Run("413 names partSize", func(t *testing.T) {
		x := e.create(t, e.strict, key(21), sizedBody(api.MaxSinglePutBytes+1, 0))
		if !bytes.Contains(x.body, []byte("partSize")) {
			t.Errorf("a single PUT over 5 GiB: %s; want a message that says to use partSize", x.body)
		}
	})
	t.Run("status of an unknown upload", func(t *testing.T) {
		wantError(t, e.send(t, e.strict, "GET", "/uploads/"+unknownUploadID, nil, nil), 404, api.CodeNotFound)
	})
	t.Run("status of a malformed upload id", func(t *testing.T) {
		wantError(t, e.send(t, e.lenient, "GET", "/uploads/not-an-upload-id", nil, nil), 404, api.CodeNotFound)
	})
	t.Run("token API Gateway would reject", func(t *testing.T) {
		for _, token := range []string{"not-a-jwt", jwtWithoutSub} {
			x := e.send(t, e.strict, "POST", "/uploads", map[string]string{
				"Idempotency-Key": key(22), "Content-Type": "application/json", "Authorization": "Bearer " + token,
			}, valid)
			wantStatus(t, x, 401)
			var m map[string]string
			decode(t, x, &m)
			if m["message"] == "" || m["error"] != "" {
				t.Errorf("401 body %s: want API Gateway's own {\"message\": ...}", x.body)
			}
		}
	})
}

// Keys and uploads are scoped to the tenant: the same key from another
// tenant is another upload, and one tenant's upload id is a 404 to another.
func (e *env) tenants(t *testing.T) {
	content := []byte("tenant scoping\n")
	const key = "contract-tenant-key-0001"
	body := createBody("t.txt", "text/plain", content, 0)
	mine := e.create(t, e.strict, key, body)
	wantStatus(t, mine, 201)
	theirs := e.send(t, e.strict, "POST", "/uploads", map[string]string{
		"Idempotency-Key": key, "Content-Type": "application/json", "Authorization": "Bearer " + otherTenantJWT,
	}, createBody("other.txt", "text/plain", []byte("another file"), 0))
	wantStatus(t, theirs, 201)
	if theirs.header.Get("Idempotent-Replay") != "" {
		t.Error("another tenant's create with the same key was answered as a replay")
	}
	var u api.Upload
	decode(t, mine, &u)
	x := e.send(t, e.strict, "GET", "/uploads/"+u.UploadID, map[string]string{"Authorization": "Bearer " + otherTenantJWT}, nil)
	wantError(t, x, 404, api.CodeNotFound)
}

// DynamoDB throttling is a 503 with Retry-After, another DynamoDB failure a
// 500 without detail; neither leaves the key claimed.
func (e *env) storageFaults(t *testing.T) {
	content := []byte("storage faults\n")
	for i, tc := range []struct {
		mode   int32
		status int
		code   string
	}{
		{modeThrottle, 503, api.CodeUnavailable},
		{modeBroken, 500, api.CodeInternal},
	} {
		key := fmt.Sprintf("contract-storage-fault-%04d", i)
		body := createBody("f.txt", "text/plain", content, 0)
		e.dynamo.mode.Store(tc.mode)
		x := e.create(t, e.strict, key, body)
		e.dynamo.mode.Store(modePass)
		wantError(t, x, tc.status, tc.code)
		if tc.status == 503 && x.header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After: %v", x.header)
		}
		if strings.Contains(string(x.body), "Exception") {
			t.Errorf("the %d body leaks internals: %s", tc.status, x.body)
		}
		retry := e.create(t, e.strict, key, body)
		wantStatus(t, retry, 201)
		if retry.header.Get("Idempotent-Replay") != "" {
			t.Errorf("after a %d the retry was a replay: the key was left claimed", tc.status)
		}
	}
}

// A file in two parts: create, replay, sign, list, PUT the parts to S3,
// complete (refused while a part is missing), complete again, and the 409s
// of a completed upload.
func (e *env) multipart(t *testing.T) {
	const key = "contract-multipart-key-0001"
	parts := [][]byte{bytes.Repeat([]byte("a"), api.MinPartSize), []byte("the last part is the remainder\n")}
	file := bytes.Join(parts, nil)
	create := createBody("two-parts.bin", "application/octet-stream", file, api.MinPartSize)

	first := e.create(t, e.strict, key, create)
	wantStatus(t, first, 201)
	var u api.Upload
	decode(t, first, &u)
	if u.Multipart == nil || u.Multipart.PartCount != 2 || u.Multipart.PartSize != api.MinPartSize || u.Upload != nil {
		t.Fatalf("multipart create: %s; want multipart {partSize %d, partCount 2} and no upload member", first.body, api.MinPartSize)
	}
	if first.header.Get("Location") != "/uploads/"+u.UploadID {
		t.Errorf("Location %q", first.header.Get("Location"))
	}
	replay := e.create(t, e.strict, key, create)
	if replay.header.Get("Idempotent-Replay") != "true" || !bytes.Equal(replay.body, first.body) {
		t.Errorf("multipart replay: %v %s", replay.header, replay.body)
	}
	base := "/uploads/" + u.UploadID

	signed := e.signParts(t, base, parts, 1, 2)
	if len(signed) != 2 || signed[0].PartNumber != 1 || signed[1].PartNumber != 2 {
		t.Fatalf("signed parts: %+v", signed)
	}
	var listed api.PartList
	decode(t, e.json(t, e.strict, "GET", base+"/parts", nil, 200), &listed)
	if len(listed.Parts) != 0 {
		t.Errorf("parts before any PUT: %+v", listed.Parts)
	}
	missing := e.json(t, e.strict, "POST", base+"/complete", nil, 409)
	wantError(t, missing, 409, api.CodePartsMissing)
	if !bytes.Contains(missing.body, []byte("1, 2")) {
		t.Errorf("parts_missing %s: want the missing part numbers named", missing.body)
	}

	// What S3 enforces, part by part: other bytes of the same length are
	// refused, the signed bytes are stored.
	wrong := bytes.Repeat([]byte("b"), len(parts[0]))
	if code := testenv.PutPart(signed[0], wrong); code < 400 {
		t.Errorf("part 1 with other bytes: S3 answered %d", code)
	}
	if code := testenv.PutPart(signed[0], parts[0]); code != 200 {
		t.Fatalf("part 1: S3 answered %d", code)
	}
	decode(t, e.json(t, e.strict, "GET", base+"/parts", nil, 200), &listed)
	sum1 := sha256.Sum256(parts[0])
	if len(listed.Parts) != 1 || listed.Parts[0].PartNumber != 1 || listed.Parts[0].Size != int64(len(parts[0])) ||
		listed.Parts[0].SHA256 != hex.EncodeToString(sum1[:]) || listed.Parts[0].ETag == "" {
		t.Errorf("parts after part 1: %+v", listed.Parts)
	}
	wantError(t, e.json(t, e.strict, "POST", base+"/complete", nil, 409), 409, api.CodePartsMissing)
	if code := testenv.PutPart(signed[1], parts[1]); code != 200 {
		t.Fatalf("part 2: S3 answered %d", code)
	}

	done := e.json(t, e.strict, "POST", base+"/complete", nil, 200)
	var c api.Upload
	decode(t, done, &c)
	whole := sha256.Sum256(file)
	sum2 := sha256.Sum256(parts[1])
	composite := sha256.Sum256(append(sum1[:], sum2[:]...))
	if want := base64.StdEncoding.EncodeToString(composite[:]) + "-2"; c.Status != api.StatusCompleted || c.CompositeSHA256 != want ||
		c.SHA256 != hex.EncodeToString(whole[:]) || c.Multipart == nil || c.Bytes != int64(len(file)) {
		t.Errorf("completed: %s\nwant status completed, compositeSha256 %s, sha256 of the whole file", done.body, want)
	}
	again := e.json(t, e.strict, "POST", base+"/complete", nil, 200)
	status := e.json(t, e.strict, "GET", base, nil, 200)
	replayed := e.create(t, e.strict, key, create)
	if !bytes.Equal(again.body, done.body) || !bytes.Equal(status.body, done.body) || !bytes.Equal(replayed.body, done.body) {
		t.Errorf("after completion, complete/GET/replay differ:\n%s\n%s\n%s\n%s", done.body, again.body, status.body, replayed.body)
	}

	sign := []byte(fmt.Sprintf(`{"parts":[{"partNumber":1,"sha256":"%x"}]}`, sum1))
	wantError(t, e.json(t, e.strict, "POST", base+"/parts", sign, 409), 409, api.CodeUploadNotPending)
	wantError(t, e.json(t, e.strict, "GET", base+"/parts", nil, 409), 409, api.CodeUploadNotPending)
	wantError(t, e.json(t, e.strict, "DELETE", base, nil, 409), 409, api.CodeUploadCompleted)
}

// Abort, and what every route answers about an aborted upload.
func (e *env) multipartAbort(t *testing.T) {
	const key = "contract-multipart-key-0002"
	create := sizedBody(3*api.MinPartSize, api.MinPartSize)
	first := e.create(t, e.strict, key, create)
	wantStatus(t, first, 201)
	var u api.Upload
	decode(t, first, &u)
	base := "/uploads/" + u.UploadID

	aborted := e.json(t, e.strict, "DELETE", base, nil, 200)
	var a api.Upload
	decode(t, aborted, &a)
	if a.Status != api.StatusAborted || a.UploadID != u.UploadID {
		t.Fatalf("abort: %s", aborted.body)
	}
	again := e.json(t, e.strict, "DELETE", base, nil, 200)
	status := e.json(t, e.strict, "GET", base, nil, 200)
	replay := e.create(t, e.strict, key, create)
	wantStatus(t, replay, 201)
	if replay.header.Get("Idempotent-Replay") != "true" || !bytes.Equal(replay.body, aborted.body) ||
		!bytes.Equal(again.body, aborted.body) || !bytes.Equal(status.body, aborted.body) {
		t.Errorf("after abort, abort/GET/replay differ:\n%s\n%s\n%s\n%s", aborted.body, again.body, status.body, replay.body)
	}
	sign := []byte(`{"parts":[{"partNumber":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`)
	wantError(t, e.json(t, e.strict, "POST", base+"/parts", sign, 409), 409, api.CodeUploadNotPending)
	wantError(t, e.json(t, e.strict, "GET", base+"/parts", nil, 409), 409, api.CodeUploadNotPending)
	wantError(t, e.json(t, e.strict, "POST", base+"/complete", nil, 409), 409, api.CodeUploadNotPending)
}

// The 400s and 404s of the multipart routes.
func (e *env) multipartErrors(t *testing.T) {
	mp := e.create(t, e.strict, "contract-multipart-key-0003", sizedBody(2*api.MinPartSize, api.MinPartSize))
	single := e.create(t, e.strict, "contract-multipart-key-0004", createBody("single.txt", "text/plain", []byte("one PUT"), 0))
	var m, s api.Upload
	decode(t, mp, &m)
	decode(t, single, &s)
	part := func(n int) string { return fmt.Sprintf(`{"partNumber":%d,"sha256":"%s"}`, n, strings.Repeat("0", 64)) }
	many := make([]string, api.MaxPartsPerSign+1)
	for i := range many {
		many[i] = part(1)
	}
	for _, tc := range []struct {
		name         string
		proxy        *testenv.Proxy
		method, path string
		body         []byte
		status       int
		code         string
	}{
		{"part number beyond partCount", e.strict, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[` + part(3) + `]}`), 400, api.CodeInvalidRequest},
		{"part listed twice", e.strict, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[` + part(1) + `,` + part(1) + `]}`), 400, api.CodeInvalidRequest},
		{"no parts", e.lenient, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[]}`), 400, api.CodeInvalidRequest},
		{"101 parts", e.lenient, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[` + strings.Join(many, ",") + `]}`), 400, api.CodeInvalidRequest},
		{"sha256 not hex", e.lenient, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[{"partNumber":1,"sha256":"xyz"}]}`), 400, api.CodeInvalidRequest},
		{"unknown member", e.lenient, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[` + part(1) + `],"extra":true}`), 400, api.CodeInvalidRequest},
		{"sign body over 16 KiB", e.lenient, "POST", "/uploads/" + m.UploadID + "/parts", []byte(`{"parts":[` + part(1) + `]` + strings.Repeat(" ", api.MaxBodyBytes) + `}`), 413, api.CodeRequestTooLarge},
		{"sign a single-PUT upload", e.strict, "POST", "/uploads/" + s.UploadID + "/parts", []byte(`{"parts":[` + part(1) + `]}`), 400, api.CodeInvalidRequest},
		{"list a single-PUT upload", e.strict, "GET", "/uploads/" + s.UploadID + "/parts", nil, 400, api.CodeInvalidRequest},
		{"complete a single-PUT upload", e.strict, "POST", "/uploads/" + s.UploadID + "/complete", nil, 400, api.CodeInvalidRequest},
		{"abort a single-PUT upload", e.strict, "DELETE", "/uploads/" + s.UploadID, nil, 400, api.CodeInvalidRequest},
		{"sign an unknown upload", e.strict, "POST", "/uploads/" + unknownUploadID + "/parts", []byte(`{"parts":[` + part(1) + `]}`), 404, api.CodeNotFound},
		{"list an unknown upload", e.strict, "GET", "/uploads/" + unknownUploadID + "/parts", nil, 404, api.CodeNotFound},
		{"complete an unknown upload", e.strict, "POST", "/uploads/" + unknownUploadID + "/complete", nil, 404, api.CodeNotFound},
		{"abort an unknown upload", e.strict, "DELETE", "/uploads/" + unknownUploadID, nil, 404, api.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			body := tc.body
			if body != nil {
				h["Content-Type"] = "application/json"
				if tc.proxy == e.lenient {
					body = exact(h, body)
				}
			}
			wantError(t, e.send(t, tc.proxy, tc.method, tc.path, h, body), tc.status, tc.code)
		})
	}
	t.Run("another tenant's upload", func(t *testing.T) {
		other := map[string]string{"Authorization": "Bearer " + otherTenantJWT}
		for _, r := range []struct{ method, path string }{
			{"GET", "/uploads/" + m.UploadID + "/parts"}, {"POST", "/uploads/" + m.UploadID + "/complete"}, {"DELETE", "/uploads/" + m.UploadID},
		} {
			wantError(t, e.send(t, e.strict, r.method, r.path, other, nil), 404, api.CodeNotFound)
		}
	})
}

// A multipart upload created without sha256 and completed with every
// part's SHA-256 declared: a declaration S3 contradicts is a 409
// parts_mismatch that stores nothing; the right one completes, with the
// whole file's sha256 given at complete recorded, and every later answer
// is that body.
func (e *env) multipartDeclared(t *testing.T) {
	const key = "contract-multipart-key-0006"
	parts := [][]byte{bytes.Repeat([]byte("c"), api.MinPartSize), []byte("declared at complete\n")}
	file := bytes.Join(parts, nil)
	create := []byte(fmt.Sprintf(`{"filename":"declared.bin","contentType":"application/octet-stream","size":%d,"partSize":%d}`, len(file), api.MinPartSize))
	first := e.create(t, e.strict, key, create)
	wantStatus(t, first, 201)
	var u api.Upload
	decode(t, first, &u)
	if u.SHA256 != "" || u.Multipart == nil || u.Multipart.PartCount != 2 {
		t.Fatalf("create without sha256: %s", first.body)
	}
	// The same key with sha256 is another request.
	whole := sha256.Sum256(file)
	withSHA := []byte(strings.Replace(string(create), `"partSize"`, fmt.Sprintf(`"sha256":"%x","partSize"`, whole), 1))
	wantError(t, e.create(t, e.strict, key, withSHA), 422, api.CodeKeyReuse)

	base := "/uploads/" + u.UploadID
	for _, p := range e.signParts(t, base, parts, 1, 2) {
		if code := testenv.PutPart(p, parts[p.PartNumber-1]); code != 200 {
			t.Fatalf("part %d: S3 answered %d", p.PartNumber, code)
		}
	}
	sum1, sum2 := sha256.Sum256(parts[0]), sha256.Sum256(parts[1])
	declare := func(d1, d2 [32]byte, whole string) []byte {
		body := fmt.Sprintf(`{"parts":[{"partNumber":2,"sha256":"%x"},{"partNumber":1,"sha256":"%x"}]`, d2, d1)
		if whole != "" {
			body += `,"sha256":"` + whole + `"`
		}
		return []byte(body + "}")
	}
	mismatch := e.json(t, e.strict, "POST", base+"/complete", declare(sum1, sha256.Sum256([]byte("other")), ""), 409)
	wantError(t, mismatch, 409, api.CodePartsMismatch)
	if !bytes.Contains(mismatch.body, []byte("one: 2.")) {
		t.Errorf("parts_mismatch %s: want part 2 named", mismatch.body)
	}
	var pending api.Upload
	decode(t, e.json(t, e.strict, "GET", base, nil, 200), &pending)
	if pending.Status != api.StatusPending {
		t.Fatalf("after parts_mismatch the upload is %s", pending.Status)
	}

	done := e.json(t, e.strict, "POST", base+"/complete", declare(sum1, sum2, strings.ToUpper(hex.EncodeToString(whole[:]))), 200)
	var c api.Upload
	decode(t, done, &c)
	composite := sha256.Sum256(append(sum1[:], sum2[:]...))
	if want := base64.StdEncoding.EncodeToString(composite[:]) + "-2"; c.Status != api.StatusCompleted || c.CompositeSHA256 != want || c.SHA256 != hex.EncodeToString(whole[:]) {
		t.Errorf("completed: %s\nwant compositeSha256 %s and the sha256 given at complete", done.body, want)
	}
	again := e.json(t, e.strict, "POST", base+"/complete", nil, 200)
	wrongAgain := e.json(t, e.strict, "POST", base+"/complete", declare(sum2, sum1, ""), 200)
	status := e.json(t, e.strict, "GET", base, nil, 200)
	replayed := e.create(t, e.strict, key, create)
	for _, x := range []exchange{again, wrongAgain, status, replayed} {
		if !bytes.Equal(x.body, done.body) {
			t.Errorf("after completion: %s\nwant %s", x.body, done.body)
		}
	}
}

// The 400s and 413 of a complete body, and a single PUT without sha256.
func (e *env) completeBodyErrors(t *testing.T) {
	mp := e.create(t, e.strict, "contract-multipart-key-0007", sizedBody(2*api.MinPartSize, api.MinPartSize))
	var m api.Upload
	decode(t, mp, &m)
	path := "/uploads/" + m.UploadID + "/complete"
	part := func(n int) string { return fmt.Sprintf(`{"partNumber":%d,"sha256":"%s"}`, n, strings.Repeat("0", 64)) }
	for _, tc := range []struct {
		name   string
		proxy  *testenv.Proxy
		body   []byte
		status int
		code   string
	}{
		{"a part left out", e.strict, []byte(`{"parts":[` + part(1) + `]}`), 400, api.CodeInvalidRequest},
		{"a part listed twice", e.strict, []byte(`{"parts":[` + part(1) + `,` + part(2) + `,` + part(1) + `]}`), 400, api.CodeInvalidRequest},
		{"a part beyond partCount", e.strict, []byte(`{"parts":[` + part(1) + `,` + part(2) + `,` + part(3) + `]}`), 400, api.CodeInvalidRequest},
		{"a sha256 other than the create's", e.strict, []byte(`{"sha256":"` + strings.Repeat("cd", 32) + `"}`), 400, api.CodeInvalidRequest},
		{"no parts", e.lenient, []byte(`{"parts":[]}`), 400, api.CodeInvalidRequest},
		{"a part's sha256 not hex", e.lenient, []byte(`{"parts":[{"partNumber":1,"sha256":"xyz"}]}`), 400, api.CodeInvalidRequest},
		{"an unknown member", e.lenient, []byte(`{"parts":[` + part(1) + `,` + part(2) + `],"size":3}`), 400, api.CodeInvalidRequest},
		{"a member given twice", e.lenient, []byte(`{"sha256":"` + strings.Repeat("ab", 32) + `","sha256":"` + strings.Repeat("ab", 32) + `"}`), 400, api.CodeInvalidRequest},
		{"body over 2 MiB", e.lenient, []byte(`{"parts":[` + part(1) + `]` + strings.Repeat(" ", 2<<20) + `}`), 413, api.CodeRequestTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json"}
			body := tc.body
			if tc.proxy == e.lenient {
				body = exact(h, body)
			}
			wantError(t, e.send(t, tc.proxy, "POST", path, h, body), tc.status, tc.code)
		})
	}
	// The upload is still pending and completes from what S3 holds
	// (here: nothing yet).
	wantError(t, e.json(t, e.strict, "POST", path, nil, 409), 409, api.CodePartsMissing)

	t.Run("aborted without sha256", func(t *testing.T) {
		x := e.create(t, e.strict, "contract-multipart-key-0008",
			[]byte(fmt.Sprintf(`{"filename":"big.bin","contentType":"application/octet-stream","size":%d,"partSize":%d}`, 2*api.MinPartSize, api.MinPartSize)))
		wantStatus(t, x, 201)
		var u api.Upload
		decode(t, x, &u)
		var a api.Upload
		decode(t, e.json(t, e.strict, "DELETE", "/uploads/"+u.UploadID, nil, 200), &a)
		if a.Status != api.StatusAborted || a.SHA256 != "" {
			t.Errorf("aborted: %+v", a)
		}
	})
	t.Run("a single PUT without sha256", func(t *testing.T) {
		h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "contract-no-sha256-single-1"}
		body := exact(h, []byte(`{"filename":"a.txt","contentType":"text/plain","size":3}`))
		x := e.send(t, e.lenient, "POST", "/uploads", h, body)
		wantError(t, x, 400, api.CodeInvalidRequest)
		if !bytes.Contains(x.body, []byte("sha256")) {
			t.Errorf("400 %s: want the message to name sha256", x.body)
		}
	})
}

// While a multipart create is between its claim and its answer, the same
// key gets 409 idempotency_in_progress with Retry-After, and once the
// first answers, the retry gets that answer.
func (e *env) multipartInProgress(t *testing.T) {
	const key = "contract-multipart-key-0005"
	create := sizedBody(2*api.MinPartSize, api.MinPartSize)
	e.dynamo.slowUpdates.Store(true)
	firstDone := make(chan exchange, 1)
	go func() {
		// Not e.create: t.Fatal must not run on this goroutine.
		req, _ := http.NewRequest("POST", e.strict.URL+"/uploads", bytes.NewReader(create))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		x := exchange{}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			x.body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			x.resp, x.status, x.header = resp, resp.StatusCode, resp.Header
		}
		firstDone <- x
	}()
	// Once the first create holds the key, its answer waits for the slowed
	// update: that is when the same key must get a 409.
	for deadline := time.Now().Add(slowUpdate); e.dynamo.held.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first create never reached its update")
		}
	}
	busy := e.create(t, e.strict, key, create)
	e.dynamo.slowUpdates.Store(false)
	first := <-firstDone
	wantError(t, busy, 409, api.CodeInProgress)
	if busy.header.Get("Retry-After") == "" {
		t.Errorf("409 idempotency_in_progress without Retry-After: %v", busy.header)
	}
	if first.resp == nil || testenv.Violations(first.resp, first.body) != "" || first.status != 201 {
		t.Fatalf("the first create: %d %s", first.status, first.body)
	}
	retry := e.create(t, e.strict, key, create)
	if retry.status != 201 || retry.header.Get("Idempotent-Replay") != "true" || !bytes.Equal(retry.body, first.body) {
		t.Errorf("the retry: %d %v %s; want the first answer replayed", retry.status, retry.header, retry.body)
	}
}

// signParts signs the listed parts of the upload at base.
func (e *env) signParts(t *testing.T, base string, parts [][]byte, numbers ...int) []api.SignedPart {
	t.Helper()
	var entries []string
	for _, n := range numbers {
		sum := sha256.Sum256(parts[n-1])
		entries = append(entries, fmt.Sprintf(`{"partNumber":%d,"sha256":"%x"}`, n, sum))
	}
	var out api.SignedParts
	decode(t, e.json(t, e.strict, "POST", base+"/parts", []byte(`{"parts":[`+strings.Join(entries, ",")+`]}`), 200), &out)
	return out.Parts
}

// json sends body (if any) as JSON through proxy and checks the status.
func (e *env) json(t *testing.T, proxy *testenv.Proxy, method, path string, body []byte, status int) exchange {
	t.Helper()
	h := map[string]string{}
	if body != nil {
		h["Content-Type"] = "application/json"
	}
	x := e.send(t, proxy, method, path, h, body)
	wantStatus(t, x, status)
	return x
}

// TestValidatorCatchesDrift proves that the proxy fails the tests when the
// server and openapi.yaml disagree: a request the document forbids, and
// answers checked against a deliberately wrong copy of the document (a
// member the server never sends, an error code it does, and a status it
// answers that the copy leaves out).
func TestValidatorCatchesDrift(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	content := []byte("drift\n")

	t.Run("request", func(t *testing.T) {
		body := []byte(strings.Replace(string(createBody("d.txt", "text/plain", content, 0)), `{`, `{"extra":1,`, 1))
		x := e.raw(t, e.strict, "POST", "/uploads", map[string]string{"Idempotency-Key": "contract-drift-key-0001", "Content-Type": "application/json"}, body)
		if testenv.Violations(x.resp, x.body) == "" {
			t.Fatalf("a body with an unknown member passed the strict proxy: %d %s", x.status, x.body)
		}
	})

	doc, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	wrong := string(doc)
	for _, m := range []struct{ old, new string }{
		// A pending upload must carry a member the server does not send.
		{"required: [uploadId, status, storageKey, filename, contentType, bytes, sha256, upload]\n",
			"required: [uploadId, status, storageKey, filename, contentType, bytes, sha256, upload, createdAt]\n"},
		// The create's 400 no longer lists idempotency_key_required.
		{"enum: [idempotency_key_required, idempotency_key_invalid, invalid_request]", "enum: [idempotency_key_invalid, invalid_request]"},
		// The create no longer documents its 415.
		{`        "415":`, `        "499":`},
		// A signed part must carry a member the server does not send.
		{"required: [partNumber, method, url, headers, expiresAt]\n", "required: [partNumber, method, url, headers, expiresAt, size]\n"},
	} {
		if strings.Count(wrong, m.old) != 1 {
			t.Fatalf("openapi.yaml changed: %q is not there exactly once; update this test's mutation", m.old)
		}
		wrong = strings.Replace(wrong, m.old, m.new, 1)
	}
	wrongSpec := filepath.Join(t.TempDir(), "openapi-wrong.yaml")
	if err := os.WriteFile(wrongSpec, []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testenv.ValidatingProxy(t, wrongSpec, e.st.APIURL, testenv.ProxyOptions{SkipRequestValidation: true})
	for _, tc := range []struct {
		name string
		key  string
		body []byte
	}{
		{"response body", "contract-drift-key-0002", createBody("d.txt", "text/plain", content, 0)},
		{"error code", "", createBody("d.txt", "text/plain", content, 0)},
		{"undocumented status", "contract-drift-key-0003", createBody("d.png", notAllowedType, content, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Content-Type": "application/json"}
			if tc.key != "" {
				h["Idempotency-Key"] = tc.key
			}
			x := e.raw(t, p, "POST", "/uploads", h, tc.body)
			v := testenv.Violations(x.resp, x.body)
			if v == "" {
				t.Fatalf("the proxy on a wrong document let this through: %d %s", x.status, x.body)
			}
			t.Logf("reported as it should be: %s", v)
		})
	}
	t.Run("multipart response body", func(t *testing.T) {
		created := e.create(t, e.strict, "contract-drift-key-0004", sizedBody(2*api.MinPartSize, api.MinPartSize))
		wantStatus(t, created, 201)
		var u api.Upload
		decode(t, created, &u)
		sign := []byte(`{"parts":[{"partNumber":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`)
		x := e.raw(t, p, "POST", "/uploads/"+u.UploadID+"/parts", map[string]string{"Content-Type": "application/json"}, sign)
		if testenv.Violations(x.resp, x.body) == "" {
			t.Fatalf("the proxy on a wrong document let this through: %d %s", x.status, x.body)
		}
	})
}

// exchange is one request's answer as the client saw it.
type exchange struct {
	resp   *http.Response
	status int
	header http.Header
	body   []byte
}

// raw sends a request through proxy and returns the answer, violations and
// all.
func (e *env) raw(t *testing.T, proxy *testenv.Proxy, method, path string, headers map[string]string, body []byte) exchange {
	t.Helper()
	req, err := http.NewRequest(method, proxy.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%v\nprism's log:\n%s", err, proxy.Log())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return exchange{resp, resp.StatusCode, resp.Header, b}
}

// send is raw that fails t when the proxy found the exchange in breach of
// openapi.yaml.
func (e *env) send(t *testing.T, proxy *testenv.Proxy, method, path string, headers map[string]string, body []byte) exchange {
	t.Helper()
	x := e.raw(t, proxy, method, path, headers, body)
	if v := testenv.Violations(x.resp, x.body); v != "" {
		t.Fatalf("%s %s breaks openapi.yaml:\n%s", method, path, v)
	}
	return x
}

func (e *env) create(t *testing.T, proxy *testenv.Proxy, key string, body []byte) exchange {
	t.Helper()
	return e.send(t, proxy, "POST", "/uploads", map[string]string{"Idempotency-Key": key, "Content-Type": "application/json"}, body)
}

// waitCompleted polls the status route until the upload is completed.
func (e *env) waitCompleted(t *testing.T, uploadID string) exchange {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		x := e.send(t, e.strict, "GET", "/uploads/"+uploadID, nil, nil)
		wantStatus(t, x, 200)
		var u api.Upload
		decode(t, x, &u)
		if u.Status == api.StatusCompleted {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload %s not completed after 10 s: %s", uploadID, x.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func createBody(filename, contentType string, content []byte, partSize int64) []byte {
	sum := sha256.Sum256(content)
	body := fmt.Sprintf(`{"filename":%q,"contentType":%q,"size":%d,"sha256":"%x"`, filename, contentType, len(content), sum)
	if partSize != 0 {
		body += fmt.Sprintf(`,"partSize":%d`, partSize)
	}
	return []byte(body + "}")
}

// sizedBody declares a file of size bytes that nobody will send.
func sizedBody(size, partSize int64) []byte {
	body := fmt.Sprintf(`{"filename":"big.bin","contentType":"application/octet-stream","size":%d,"sha256":"%s"`, size, strings.Repeat("ab", 32))
	if partSize != 0 {
		body += fmt.Sprintf(`,"partSize":%d`, partSize)
	}
	return []byte(body + "}")
}

func wantStatus(t *testing.T, x exchange, status int) {
	t.Helper()
	if x.status != status {
		t.Fatalf("status %d, want %d: %s", x.status, status, x.body)
	}
}

func wantError(t *testing.T, x exchange, status int, code string) {
	t.Helper()
	wantStatus(t, x, status)
	var body api.Error
	decode(t, x, &body)
	if body.Error != code || body.Message == "" {
		t.Fatalf("error body %s, want code %q and a message", x.body, code)
	}
}

func decode(t *testing.T, x exchange, v any) {
	t.Helper()
	if err := json.Unmarshal(x.body, v); err != nil {
		t.Fatalf("body %q: %v", x.body, err)
	}
}

// exactBodyHeader carries the exact body a test means the server to get,
// gzipped (a padded body would not fit in a header otherwise) and
// base64-encoded.
const exactBodyHeader = "X-Contract-Exact-Body"

// exact sets h up so that exactBodies delivers body to the server byte for
// byte, and returns the body to give Prism instead: Prism re-encodes JSON
// bodies before forwarding them, so the bytes a strict-input test is about
// (a member given twice, padding, invalid UTF-8) would never arrive.
func exact(h map[string]string, body []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(body)
	_ = zw.Close()
	h[exactBodyHeader] = base64.StdEncoding.EncodeToString(buf.Bytes())
	return []byte("{}")
}

// exactBodies is a reverse proxy to upstream, between the lenient Prism and
// the stack, that puts back the body a test set with exact. Requests
// without the header pass unchanged; the answer is never touched, so Prism
// validates the server's real answer to the real bytes.
func exactBodies(t *testing.T, upstream string) string {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if enc := r.Header.Get(exactBodyHeader); enc != "" {
			body, err := gunzip(enc)
			if err != nil {
				http.Error(w, "bad "+exactBodyHeader, http.StatusBadRequest)
				return
			}
			r.Header.Del(exactBodyHeader)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func gunzip(enc string) ([]byte, error) {
	zipped, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// dynamoSwitch stands between the functions and DynamoDB: it forwards, or
// answers every call as a throttled or a failing DynamoDB, and can hold
// each UpdateItem back for slowUpdate.
type dynamoSwitch struct {
	url         string
	mode        atomic.Int32
	slowUpdates atomic.Bool
	held        atomic.Int32 // updates being held back now
}

const slowUpdate = 2 * time.Second

const (
	modePass int32 = iota
	modeThrottle
	modeBroken
)

func newDynamoSwitch(t *testing.T, target string) *dynamoSwitch {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	d := &dynamoSwitch{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch d.mode.Load() {
		case modeThrottle:
			dynamoError(w, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
		case modeBroken:
			dynamoError(w, "ValidationException", "One or more parameter values were invalid.")
		default:
			if d.slowUpdates.Load() && strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
				d.held.Add(1)
				time.Sleep(slowUpdate)
				d.held.Add(-1)
			}
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	d.url = srv.URL
	return d
}

// dynamoError answers as DynamoDB does, with the CRC32 the SDK checks.
func dynamoError(w http.ResponseWriter, typ, msg string) {
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, typ, msg)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, body)
}
