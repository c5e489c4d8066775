package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
)

// smoke holds one run's settings and counts its failed checks.
type smoke struct {
	api    *url.URL
	origin string
	token  string // ONCEUPLOAD_TOKEN; never printed
	// contentType is every file's (a deployment's ALLOWED_CONTENT_TYPES
	// may refuse the default, text/plain).
	contentType string
	timeout     time.Duration
	poll        time.Duration
	run         string
	http        *http.Client
	out         io.Writer
	failed      int
}

// skipped is a check's result when it could not be judged: the server does
// not enforce what it checks, nothing was given to check, or a check it
// builds on failed.
type skipped struct{ why string }

func (s skipped) Error() string { return s.why }

// check runs fn and prints its line: PASS and what was seen, FAIL and why,
// or SKIP and why. It reports whether fn passed.
func (s *smoke) check(name string, fn func() (string, error)) bool {
	detail, err := fn()
	var skip skipped
	switch {
	case errors.As(err, &skip):
		fmt.Fprintf(s.out, "SKIP  %-16s %s\n", name, skip.why)
	case err != nil:
		s.failed++
		fmt.Fprintf(s.out, "FAIL  %-16s %v\n", name, err)
	default:
		fmt.Fprintf(s.out, "PASS  %-16s %s\n", name, detail)
		return true
	}
	return false
}

// runChecks runs every check in order and returns how many failed.
func (s *smoke) runChecks(ctx context.Context) int {
	fmt.Fprintf(s.out, "smoke: %s, run %s, files onceupload-smoke-%s-…\n", s.api.Redacted(), s.run, s.run)
	single := s.newFile("single", 64<<10)
	var created api.Upload
	var firstBody []byte
	createdOK := s.check("create", func() (string, error) {
		res, err := s.create(ctx, single)
		if err != nil {
			return "", err
		}
		if res.status != http.StatusCreated {
			return "", res.unexpected("201")
		}
		if res.header.Get("Idempotent-Replay") != "" {
			return "", fmt.Errorf("the key %s was used before (Idempotent-Replay: %s): give a --run not used before", single.key, res.header.Get("Idempotent-Replay"))
		}
		if err := json.Unmarshal(res.body, &created); err != nil {
			return "", fmt.Errorf("201 body %s: %v", clip(res.body), err)
		}
		s.made(created.UploadID, single)
		if created.Status != api.StatusPending || created.Upload == nil || created.Upload.URL == "" {
			return "", fmt.Errorf("201 is not a pending single PUT: %s", clip(res.body))
		}
		if loc := res.header.Get("Location"); loc != "/uploads/"+created.UploadID {
			return "", fmt.Errorf("the 201 says Location %q, want /uploads/%s", loc, created.UploadID)
		}
		firstBody = res.body
		return fmt.Sprintf("201 pending, Location /uploads/%s", created.UploadID), nil
	})
	after := func(ok bool, what string, fn func() (string, error)) func() (string, error) {
		if !ok {
			return func() (string, error) { return "", skipped{"needs " + what + ", which did not pass"} }
		}
		return fn
	}
	s.check("replay", after(createdOK, "create", func() (string, error) {
		res, err := s.create(ctx, single)
		if err != nil {
			return "", err
		}
		if res.status != http.StatusCreated || res.header.Get("Idempotent-Replay") != "true" {
			return "", res.unexpected("201 with Idempotent-Replay: true")
		}
		if !bytes.Equal(res.body, firstBody) {
			return "", fmt.Errorf("the replay's body is not the first answer's bytes: first %s, replay %s", clip(firstBody), clip(res.body))
		}
		return "201 Idempotent-Replay: true, the first answer byte for byte", nil
	}))
	s.check("key-reuse", after(createdOK, "create", func() (string, error) {
		other := single
		other.data = append(slices.Clone(single.data), '!')
		other.sum = sha256.Sum256(other.data)
		res, err := s.create(ctx, other)
		if err != nil {
			return "", err
		}
		if res.status != http.StatusUnprocessableEntity || res.code() != "idempotency_key_reuse" {
			return "", res.unexpected("422 idempotency_key_reuse")
		}
		return "422 idempotency_key_reuse for the same key with another size and sha256", nil
	}))
	putOK := s.check("put", after(createdOK, "create", func() (string, error) {
		res, err := s.put(ctx, *created.Upload, single.data, nil)
		if err != nil {
			return "", err
		}
		if res.status != http.StatusOK {
			return "", res.unexpected("200")
		}
		return fmt.Sprintf("200, %d bytes to the presigned URL", len(single.data)), nil
	}))
	s.check("put-again", after(putOK, "put", func() (string, error) {
		res, err := s.put(ctx, *created.Upload, single.data, nil)
		if err != nil {
			return "", err
		}
		if res.status/100 == 2 {
			return "", fmt.Errorf("%d: the storage took a second PUT to the same URL (If-None-Match: * not enforced): an object can be stored twice", res.status)
		}
		if res.status != http.StatusPreconditionFailed {
			return "", res.unexpected("412")
		}
		return "412 " + res.code() + ": a second PUT to the same URL is refused", nil
	}))
	var finalized api.Upload
	finalizeOK := s.check("finalize", after(putOK, "put", func() (string, error) {
		// The create's replay never asks S3 (the status route does, and
		// would complete the upload itself), so only finalize's record
		// makes it say completed.
		start := time.Now()
		var err error
		finalized, err = s.untilSettled(ctx, http.StatusCreated, func() (*answer, error) { return s.create(ctx, single) })
		if errors.Is(err, errTimeout) {
			return "", fmt.Errorf("after %s a replay of the create still says %q: nothing recorded the upload, so finalize did not run or failed (the bucket's notification to FinalizeFunction, its logs, FinalizeFailureQueue)", s.timeout, finalized.Status)
		}
		if err != nil {
			return "", err
		}
		if finalized.Status != api.StatusCompleted || finalized.Bytes != int64(len(single.data)) || finalized.ETag == "" {
			return "", fmt.Errorf("finalize recorded %s, %d bytes, ETag %q; want completed, %d bytes, an ETag", finalized.Status, finalized.Bytes, finalized.ETag, len(single.data))
		}
		return fmt.Sprintf("completed after %.1f s, seen by replaying the create, which never asks S3", time.Since(start).Seconds()), nil
	}))
	s.check("status", after(putOK, "put", func() (string, error) {
		u, err := s.untilSettled(ctx, http.StatusOK, func() (*answer, error) {
			return s.call(ctx, http.MethodGet, "/uploads/"+created.UploadID, "", nil)
		})
		if errors.Is(err, errTimeout) {
			return "", fmt.Errorf("after %s GET /uploads/%s still says pending", s.timeout, created.UploadID)
		}
		if err != nil {
			return "", err
		}
		if u.Status != api.StatusCompleted || u.Bytes != int64(len(single.data)) {
			return "", fmt.Errorf("status %s, %d bytes; want completed, %d", u.Status, u.Bytes, len(single.data))
		}
		if finalizeOK && u.ETag != finalized.ETag {
			return "", fmt.Errorf("status ETag %q, the replay's %q", u.ETag, finalized.ETag)
		}
		return "200 completed, ETag " + u.ETag, nil
	}))
	s.check("unsigned-header", func() (string, error) { return s.unsignedHeader(ctx) })
	s.check("multipart", func() (string, error) { return s.multipart(ctx) })
	s.check("cors-api", func() (string, error) { return s.corsAPI(ctx) })
	s.check("cors-storage", after(createdOK, "create", func() (string, error) { return s.corsStorage(ctx, *created.Upload) }))
	if s.failed > 0 {
		fmt.Fprintf(s.out, "smoke: %d check(s) failed\n", s.failed)
	} else {
		fmt.Fprintln(s.out, "smoke: no check failed")
	}
	return s.failed
}

// unsignedHeader PUTs a new upload's bytes with an x-amz-meta header the
// URL does not sign: S3 refuses it, so no one holding a URL can add
// metadata, a storage class or an ACL to what it stores.
func (s *smoke) unsignedHeader(ctx context.Context) (string, error) {
	f := s.newFile("unsigned", 1<<10)
	res, err := s.create(ctx, f)
	if err != nil {
		return "", err
	}
	if res.status != http.StatusCreated {
		return "", res.unexpected("201 (a new upload to PUT with an unsigned header)")
	}
	var u api.Upload
	if err := json.Unmarshal(res.body, &u); err != nil || u.Upload == nil {
		return "", fmt.Errorf("201 body %s: not a single PUT", clip(res.body))
	}
	s.made(u.UploadID, f)
	put, err := s.put(ctx, *u.Upload, f.data, http.Header{"X-Amz-Meta-Smoke": {"unsigned"}})
	if err != nil {
		return "", err
	}
	return judgeUnsigned(put, hostOf(u.Upload.URL))
}

// judgeUnsigned judges the answer to a PUT with an unsigned x-amz-* header
// from the storage at host: a refusal passes; a store fails on AWS S3, which
// refuses it, and is skipped on another server, which may not check.
func judgeUnsigned(put *answer, host string) (string, error) {
	if put.status/100 == 2 {
		if isAWS(host) {
			return "", fmt.Errorf("%d: S3 stored a PUT with an x-amz-meta-smoke header the URL does not sign", put.status)
		}
		return "", skipped{fmt.Sprintf("the storage at %s stored a PUT with an unsigned x-amz-meta-smoke header: it does not check that x-amz-* headers are signed (AWS S3 does)", host)}
	}
	// AWS answers 403 AccessDenied, MinIO the same code with a 400: a
	// refusal either way.
	if put.status/100 != 4 {
		return "", put.unexpected("403")
	}
	return fmt.Sprintf("%d %s: a header the URL does not sign is refused", put.status, put.code()), nil
}

// multipart makes a two-part upload, sends part 1, resumes as a restarted
// client does (the part list says what S3 holds), sends part 2 and
// completes with every part's SHA-256. On failure it aborts the upload.
func (s *smoke) multipart(ctx context.Context) (detail string, err error) {
	const partSize = api.MinPartSize
	f := s.newFile("multipart", partSize+(64<<10))
	res, err := s.create(ctx, f, partSize)
	if err != nil {
		return "", err
	}
	if res.status != http.StatusCreated {
		return "", res.unexpected("201")
	}
	var u api.Upload
	if err := json.Unmarshal(res.body, &u); err != nil || u.Multipart == nil || u.Multipart.PartCount != 2 {
		return "", fmt.Errorf("201 body %s: not a two-part upload", clip(res.body))
	}
	s.made(u.UploadID, f)
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w; %s", err, s.abort(ctx, u.UploadID))
		}
	}()
	parts := [][]byte{f.data[:partSize], f.data[partSize:]}
	sums := []string{hexSum(parts[0]), hexSum(parts[1])}
	if err := s.sendPart(ctx, u.UploadID, 1, parts[0], sums[0]); err != nil {
		return "", err
	}
	// A restarted client knows only the upload: it asks what S3 holds.
	list, err := s.call(ctx, http.MethodGet, "/uploads/"+u.UploadID+"/parts", "", nil)
	if err != nil {
		return "", err
	}
	var held api.PartList
	if list.status != http.StatusOK {
		return "", list.unexpected("200 (the part list)")
	}
	if err := json.Unmarshal(list.body, &held); err != nil {
		return "", fmt.Errorf("part list %s: %v", clip(list.body), err)
	}
	if len(held.Parts) != 1 || held.Parts[0].PartNumber != 1 || held.Parts[0].SHA256 != sums[0] || held.Parts[0].Size != partSize {
		return "", fmt.Errorf("after part 1 the part list is %s, want part 1 alone with its size and SHA-256", clip(list.body))
	}
	if err := s.sendPart(ctx, u.UploadID, 2, parts[1], sums[1]); err != nil {
		return "", err
	}
	done, err := s.call(ctx, http.MethodPost, "/uploads/"+u.UploadID+"/complete", "", api.CompleteRequest{
		Parts: []api.PartToSign{{PartNumber: 1, SHA256: sums[0]}, {PartNumber: 2, SHA256: sums[1]}}, SHA256: hex.EncodeToString(f.sum[:]),
	})
	if err != nil {
		return "", err
	}
	if done.status != http.StatusOK {
		return "", done.unexpected("200 (complete)")
	}
	var c api.Upload
	if err := json.Unmarshal(done.body, &c); err != nil {
		return "", fmt.Errorf("complete body %s: %v", clip(done.body), err)
	}
	if c.Status != api.StatusCompleted || c.Bytes != int64(len(f.data)) || !strings.HasSuffix(c.CompositeSHA256, "-2") {
		return "", fmt.Errorf("complete answered %s", clip(done.body))
	}
	again, err := s.create(ctx, f, partSize)
	if err != nil {
		return "", err
	}
	if again.status != http.StatusCreated || again.code() != "" || !bytes.Contains(again.body, []byte(`"status":"completed"`)) {
		return "", again.unexpected("201 completed (the create's replay after complete)")
	}
	return fmt.Sprintf("2 parts, resumed from the part list after part 1, completed (compositeSha256 %s), replayed completed", c.CompositeSHA256), nil
}

// sendPart signs part n with its SHA-256 and PUTs it.
func (s *smoke) sendPart(ctx context.Context, uploadID string, n int, data []byte, sum string) error {
	res, err := s.call(ctx, http.MethodPost, "/uploads/"+uploadID+"/parts", "", api.SignPartsRequest{Parts: []api.PartToSign{{PartNumber: n, SHA256: sum}}})
	if err != nil {
		return err
	}
	if res.status != http.StatusOK {
		return fmt.Errorf("signing part %d: %w", n, res.unexpected("200"))
	}
	var signed api.SignedParts
	if err := json.Unmarshal(res.body, &signed); err != nil || len(signed.Parts) != 1 {
		return fmt.Errorf("signing part %d: %s", n, clip(res.body))
	}
	put, err := s.put(ctx, signed.Parts[0].PutInstructions, data, nil)
	if err != nil {
		return fmt.Errorf("part %d: %w", n, err)
	}
	if put.status != http.StatusOK {
		return fmt.Errorf("part %d: %w", n, put.unexpected("200"))
	}
	return nil
}

// abort aborts the smoke's own multipart upload and says how it went.
func (s *smoke) abort(ctx context.Context, uploadID string) string {
	res, err := s.call(context.WithoutCancel(ctx), http.MethodDelete, "/uploads/"+uploadID, "", nil)
	switch {
	case err != nil:
		return fmt.Sprintf("aborting upload %s failed: %v (abort it by hand: DELETE /uploads/%s)", uploadID, err, uploadID)
	case res.status != http.StatusOK:
		return fmt.Sprintf("aborting upload %s answered %d %s", uploadID, res.status, clip(res.body))
	}
	return "aborted upload " + uploadID
}

// corsAPI preflights a create from the origin, then checks an answer to
// it carries the origin and exposes the headers a page reads.
func (s *smoke) corsAPI(ctx context.Context) (string, error) {
	if s.origin == "" {
		return "", skipped{"no --origin given"}
	}
	pre, err := s.preflight(ctx, s.endpoint("/uploads"), http.MethodPost, []string{"authorization", "content-type", "idempotency-key"})
	if err != nil {
		return "", fmt.Errorf("preflight of POST /uploads: %w", err)
	}
	// The real answer: any route will do; a status of an unknown id is a
	// 404 that still carries CORS headers.
	res, err := s.call(ctx, http.MethodGet, "/uploads/onceupload-smoke-cors-probe", "", nil, "Origin", s.origin)
	if err != nil {
		return "", err
	}
	if got := res.header.Get("Access-Control-Allow-Origin"); got != s.origin && got != "*" {
		return "", fmt.Errorf("GET /uploads/… from %s answered Access-Control-Allow-Origin %q", s.origin, got)
	}
	exposed := lowerList(res.header.Get("Access-Control-Expose-Headers"))
	for _, h := range []string{"location", "idempotent-replay", "retry-after"} {
		if !slices.Contains(exposed, h) && !slices.Contains(exposed, "*") {
			return "", fmt.Errorf("answers to %s expose %q, without %s", s.origin, res.header.Get("Access-Control-Expose-Headers"), h)
		}
	}
	return pre + "; answers expose Location, Idempotent-Replay, Retry-After", nil
}

// corsStorage preflights the PUT to a presigned URL with the headers the
// API told the client to send.
func (s *smoke) corsStorage(ctx context.Context, put api.PutInstructions) (string, error) {
	if s.origin == "" {
		return "", skipped{"no --origin given"}
	}
	var headers []string
	for h := range put.Headers {
		headers = append(headers, strings.ToLower(h))
	}
	sort.Strings(headers)
	pre, err := s.preflight(ctx, put.URL, http.MethodPut, headers)
	if err != nil {
		return "", fmt.Errorf("preflight of the storage PUT: %w", err)
	}
	return pre, nil
}

// preflight sends a CORS preflight from the origin and checks the answer
// allows the method and every header.
func (s *smoke) preflight(ctx context.Context, target, method string, headers []string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodOptions, target, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Origin", s.origin)
	req.Header.Set("Access-Control-Request-Method", method)
	req.Header.Set("Access-Control-Request-Headers", strings.Join(headers, ","))
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	allowOrigin := resp.Header.Get("Access-Control-Allow-Origin")
	if resp.StatusCode/100 != 2 || (allowOrigin != s.origin && allowOrigin != "*") {
		return "", fmt.Errorf("%d, Access-Control-Allow-Origin %q: %s is not allowed", resp.StatusCode, allowOrigin, s.origin)
	}
	methods := strings.Split(strings.ReplaceAll(resp.Header.Get("Access-Control-Allow-Methods"), " ", ""), ",")
	if !slices.Contains(methods, method) && !slices.Contains(methods, "*") {
		return "", fmt.Errorf("Access-Control-Allow-Methods %q lacks %s", resp.Header.Get("Access-Control-Allow-Methods"), method)
	}
	allowed := lowerList(resp.Header.Get("Access-Control-Allow-Headers"))
	for _, h := range headers {
		if !slices.Contains(allowed, h) && !slices.Contains(allowed, "*") {
			return "", fmt.Errorf("Access-Control-Allow-Headers %q lacks %s", resp.Header.Get("Access-Control-Allow-Headers"), h)
		}
	}
	return fmt.Sprintf("%d: %s may %s with %s", resp.StatusCode, s.origin, method, strings.Join(headers, ", ")), nil
}

// file is one upload the smoke makes: its name, key and bytes.
type file struct {
	name, key, contentType string
	data                   []byte
	sum                    [32]byte
}

// newFile makes the run's file of kind: size bytes of text naming the run,
// so an object found in the bucket says where it came from.
func (s *smoke) newFile(kind string, size int) file {
	line := []byte(fmt.Sprintf("onceupload smoke test, run %s, %s\n", s.run, kind))
	data := bytes.Repeat(line, size/len(line)+1)[:size]
	return file{
		name: fmt.Sprintf("onceupload-smoke-%s-%s.txt", s.run, kind), key: fmt.Sprintf("onceupload-smoke-%s-%s", s.run, kind),
		contentType: s.contentType, data: data, sum: sha256.Sum256(data),
	}
}

// made prints what the run made, so it can be found and removed.
func (s *smoke) made(uploadID string, f file) {
	fmt.Fprintf(s.out, "      made upload %s (Idempotency-Key %s, file %s)\n", uploadID, f.key, f.name)
}

// create POSTs f's create with its key; a partSize makes it multipart.
func (s *smoke) create(ctx context.Context, f file, partSize ...int64) (*answer, error) {
	req := api.CreateRequest{Filename: f.name, ContentType: f.contentType, Size: int64(len(f.data)), SHA256: hex.EncodeToString(f.sum[:])}
	if len(partSize) > 0 {
		req.PartSize = partSize[0]
	}
	return s.call(ctx, http.MethodPost, "/uploads", f.key, req)
}

// answer is an HTTP answer read whole.
type answer struct {
	what   string // "POST /uploads", "PUT to the presigned URL"
	status int
	header http.Header
	body   []byte
}

// code is the error code of an API error body or an S3 error document.
func (a *answer) code() string {
	var e api.Error
	if json.Unmarshal(a.body, &e) == nil && e.Error != "" {
		return e.Error
	}
	var x struct {
		Code string `xml:"Code"`
	}
	if xml.Unmarshal(a.body, &x) == nil {
		return x.Code
	}
	return ""
}

// unexpected says what came instead of want.
func (a *answer) unexpected(want string) error {
	return fmt.Errorf("%s answered %d %s, want %s", a.what, a.status, clip(a.body), want)
}

// call sends an API request: JSON body, the key as Idempotency-Key, the
// token as a bearer, and extra header pairs.
func (s *smoke) call(ctx context.Context, method, path, key string, body any, extra ...string) (*answer, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.endpoint(path), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	return s.do(req, method+" "+path)
}

// put sends data to a presigned URL with the headers it signs, and extra.
func (s *smoke) put(ctx context.Context, p api.PutInstructions, data []byte, extra http.Header) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	return s.do(req, "PUT to the presigned URL")
}

func (s *smoke) do(req *http.Request, what string) (*answer, error) {
	resp, err := s.http.Do(req)
	if err != nil {
		// The URL of a PUT is a credential: say where, not what.
		return nil, fmt.Errorf("%s: no answer: %v", what, redactURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: answer cut short: %v", what, redactURL(err))
	}
	return &answer{what: what, status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// endpoint is path under the API's base URL (a stage in its path is kept).
func (s *smoke) endpoint(path string) string {
	return strings.TrimSuffix(s.api.String(), "/") + path
}

var errTimeout = errors.New("timed out")

// until calls done every poll interval until it says true, fails, or the
// timeout passes (errTimeout).
func (s *smoke) until(ctx context.Context, done func() (bool, error)) error {
	deadline := time.Now().Add(s.timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().Add(s.poll).After(deadline) {
			return errTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.poll):
		}
	}
}

// untilSettled asks fetch for an upload every poll interval until it is
// no longer pending (want is the status of its answers), and returns the
// last one read: on errTimeout, still pending.
func (s *smoke) untilSettled(ctx context.Context, want int, fetch func() (*answer, error)) (api.Upload, error) {
	var u api.Upload
	err := s.until(ctx, func() (bool, error) {
		res, err := fetch()
		if err != nil {
			return false, err
		}
		if res.status != want {
			return false, res.unexpected(fmt.Sprint(want))
		}
		if err := json.Unmarshal(res.body, &u); err != nil {
			return false, fmt.Errorf("%s: body %s: %v", res.what, clip(res.body), err)
		}
		return u.Status != api.StatusPending, nil
	})
	return u, err
}

// redactURL drops the query (a presigned URL's signature) from a
// *url.Error's URL.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Host
}

// isAWS reports whether host is AWS's S3, which must enforce what a local
// server may not.
func isAWS(host string) bool {
	h := strings.ToLower(host)
	return strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn")
}

func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func lowerList(v string) []string {
	var out []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// clip shortens a body for a one-line report.
func clip(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
