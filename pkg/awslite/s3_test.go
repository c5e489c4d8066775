package awslite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/pkg/awslite"
	"github.com/onceupload/onceupload/pkg/upload"
)

var _ upload.ObjectAPI = (*awslite.S3)(nil)

// sentRequest is what a fake S3 server received.
type sentRequest struct {
	method, host, uri string
	header            http.Header
	body              string
}

// fakeS3 answers every request with answer and records what it got.
type fakeS3 struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []sentRequest
}

func newFakeS3(t *testing.T, answer http.HandlerFunc) *fakeS3 {
	f := &fakeS3{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, sentRequest{r.Method, r.Host, r.RequestURI, r.Header.Clone(), string(body)})
		f.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// take returns the requests received since the last take.
func (f *fakeS3) take() []sentRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.requests
	f.requests = nil
	return r
}

// config is an SDK config whose every host name leads to f: the SDK's
// virtual-hosted bucket.s3.test reaches it as path style does.
func (f *fakeS3) config() aws.Config {
	addr := f.srv.Listener.Addr().String()
	dialer := &net.Dialer{}
	return aws.Config{
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		BaseEndpoint: aws.String("http://s3.test"),
		HTTPClient: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, addr)
			},
		}},
	}
}

// clients returns the SDK's client and ours for f, addressing buckets
// alike.
func (f *fakeS3) clients(t *testing.T, pathStyle bool, optFns ...func(*awslite.Options)) (*s3.Client, *awslite.S3) {
	t.Helper()
	sdk := s3.NewFromConfig(f.config(), func(o *s3.Options) { o.UsePathStyle = pathStyle })
	lite, err := awslite.NewS3(f.config(), append([]func(*awslite.Options){func(o *awslite.Options) { o.UsePathStyle = pathStyle }}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	return sdk, lite
}

// cannedS3 answers each operation as S3 does, with every header and
// element the outputs carry, so decoding can be compared with the SDK's.
func cannedS3(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	h := w.Header()
	h.Set("X-Amz-Request-Id", "REQ123")
	switch {
	case r.Method == http.MethodHead:
		h.Set("Accept-Ranges", "bytes")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Length", "11")
		h.Set("Content-Type", "image/png")
		h.Set("ETag", `"9b2cf535f27731c974343645a3985328-2"`)
		h.Set("Expires", "Thu, 01 Dec 1994 16:00:00 GMT")
		h.Set("Last-Modified", "Wed, 12 Oct 2009 17:50:00 GMT")
		h.Set("X-Amz-Checksum-Sha256", "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=-2")
		h.Set("X-Amz-Checksum-Type", "COMPOSITE")
		h.Set("X-Amz-Delete-Marker", "false")
		h.Set("X-Amz-Meta-Filename", " photo.png ")
		h.Set("X-Amz-Meta-Tenant", "t1")
		h.Set("X-Amz-Mp-Parts-Count", "2")
		h.Set("X-Amz-Server-Side-Encryption", "AES256")
		h.Set("X-Amz-Storage-Class", "STANDARD_IA")
		h.Set("X-Amz-Tagging-Count", "3")
		h.Set("X-Amz-Version-Id", "v1")
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		h.Set("X-Amz-Request-Charged", "requester")
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodDelete:
		h.Set("X-Amz-Delete-Marker", "true")
		h.Set("X-Amz-Version-Id", "v2")
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && q.Has("uploads"):
		h.Set("X-Amz-Abort-Date", "Wed, 28 Oct 2009 00:00:00 GMT")
		h.Set("X-Amz-Abort-Rule-Id", "abort-7-days")
		h.Set("X-Amz-Checksum-Algorithm", "SHA256")
		h.Set("X-Amz-Checksum-Type", "COMPOSITE")
		h.Set("X-Amz-Server-Side-Encryption", "AES256")
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>my-bucket</Bucket><Key>in/a b+c%é</Key><UploadId>VXBsb2Fk+/=</UploadId></InitiateMultipartUploadResult>`)
	case r.Method == http.MethodGet:
		h.Set("X-Amz-Abort-Date", "Wed, 28 Oct 2009 00:00:00 GMT")
		h.Set("X-Amz-Abort-Rule-Id", "abort-7-days")
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>my-bucket</Bucket><Key>in/a b+c%é</Key><UploadId>VXBsb2Fk+/=</UploadId>
  <Initiator><ID>arn:aws:iam::111122223333:user/me</ID><DisplayName>me</DisplayName></Initiator>
  <Owner><ID>abc</ID><DisplayName>owner</DisplayName></Owner>
  <StorageClass>STANDARD</StorageClass>
  <PartNumberMarker>1</PartNumberMarker><NextPartNumberMarker>3</NextPartNumberMarker>
  <MaxParts>2</MaxParts><IsTruncated>true</IsTruncated>
  <ChecksumAlgorithm>SHA256</ChecksumAlgorithm><ChecksumType>COMPOSITE</ChecksumType>
  <Part><PartNumber>2</PartNumber><LastModified>2009-10-12T17:50:30.000Z</LastModified><ETag>&quot;7778aef83f66abc1fa1e8477f296d394&quot;</ETag><Size>5242880</Size><ChecksumSHA256>n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=</ChecksumSHA256></Part>
  <Part><PartNumber>3</PartNumber><LastModified>2009-10-12T17:50:31.123Z</LastModified><ETag>"aaaa"</ETag><Size>1</Size></Part>
</ListPartsResult>`)
	case r.Method == http.MethodPost:
		h.Set("X-Amz-Expiration", `expiry-date="Fri, 23 Dec 2012 00:00:00 GMT", rule-id="r"`)
		h.Set("X-Amz-Server-Side-Encryption", "AES256")
		h.Set("X-Amz-Version-Id", "v3")
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>
<CompleteMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Location>http://s3.test/my-bucket/in/a%20b</Location><Bucket>my-bucket</Bucket><Key>in/a b+c%é</Key><ETag>"3858f62230ac3c915f300c664312c11f-9"</ETag><ChecksumSHA256>n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=-9</ChecksumSHA256><ChecksumType>COMPOSITE</ChecksumType></CompleteMultipartUploadResult>`)
	default:
		http.Error(w, "unexpected", http.StatusTeapot)
	}
}

// s3Operation is one call made with the SDK's client or with awslite.
type s3Operation struct {
	name string
	sdk  func(context.Context, *s3.Client) (any, error)
	lite func(context.Context, *awslite.S3) (any, error)
}

// s3Operations sends every method with every input field it supports set,
// on a key that needs escaping.
func s3Operations() []s3Operation {
	bucket, key, uploadID := aws.String("my-bucket"), aws.String("in/a b+c%é/~x"), aws.String("VXBsb2Fk+/=")
	head := &s3.HeadObjectInput{Bucket: bucket, Key: key, ChecksumMode: types.ChecksumModeEnabled,
		IfMatch: aws.String(`"abc"`), IfNoneMatch: aws.String(`"def"`), VersionId: aws.String("v1"), ExpectedBucketOwner: aws.String("111122223333")}
	del := &s3.DeleteObjectInput{Bucket: bucket, Key: key, IfMatch: aws.String(`"abc"`), VersionId: aws.String("v 1"), ExpectedBucketOwner: aws.String("111122223333")}
	create := &s3.CreateMultipartUploadInput{Bucket: bucket, Key: key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumType: types.ChecksumTypeComposite, ContentType: aws.String("image/png; q=1"), CacheControl: aws.String("max-age=60"),
		ContentDisposition: aws.String(`attachment; filename="a b.png"`), ContentEncoding: aws.String("identity"),
		Metadata: map[string]string{"filename": "a b.png", "Tenant-ID": "t1"}, ExpectedBucketOwner: aws.String("111122223333")}
	list := &s3.ListPartsInput{Bucket: bucket, Key: key, UploadId: uploadID, MaxParts: aws.Int32(2), PartNumberMarker: aws.String("1"),
		ExpectedBucketOwner: aws.String("111122223333")}
	complete := &s3.CompleteMultipartUploadInput{Bucket: bucket, Key: key, UploadId: uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: aws.String(`"7778aef83f66abc1fa1e8477f296d394"`), ChecksumSHA256: aws.String("n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=")},
			{PartNumber: aws.Int32(2), ETag: aws.String(`"a&b<c>'"`), ChecksumCRC32: aws.String("AAAAAA==")},
		}},
		MpuObjectSize: aws.Int64(5242881), IfMatch: aws.String(`"x"`), IfNoneMatch: aws.String("*"),
		ChecksumSHA256: aws.String("n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="), ChecksumType: types.ChecksumTypeComposite,
		ExpectedBucketOwner: aws.String("111122223333")}
	abort := &s3.AbortMultipartUploadInput{Bucket: bucket, Key: key, UploadId: uploadID, ExpectedBucketOwner: aws.String("111122223333")}
	return []s3Operation{
		{"HeadObject",
			func(ctx context.Context, c *s3.Client) (any, error) { return c.HeadObject(ctx, head) },
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.HeadObject(ctx, head) }},
		{"DeleteObject",
			func(ctx context.Context, c *s3.Client) (any, error) { return c.DeleteObject(ctx, del) },
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.DeleteObject(ctx, del) }},
		{"CreateMultipartUpload",
			func(ctx context.Context, c *s3.Client) (any, error) { return c.CreateMultipartUpload(ctx, create) },
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.CreateMultipartUpload(ctx, create) }},
		{"ListParts",
			func(ctx context.Context, c *s3.Client) (any, error) { return c.ListParts(ctx, list) },
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.ListParts(ctx, list) }},
		{"CompleteMultipartUpload",
			func(ctx context.Context, c *s3.Client) (any, error) { return c.CompleteMultipartUpload(ctx, complete) },
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.CompleteMultipartUpload(ctx, complete) }},
		{"AbortMultipartUpload",
			func(ctx context.Context, c *s3.Client) (any, error) { return c.AbortMultipartUpload(ctx, abort) },
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.AbortMultipartUpload(ctx, abort) }},
	}
}

// withoutMetadata returns a copy of an output without its ResultMetadata,
// which only the SDK fills, nor HeadObject's deprecated Expires, which
// awslite leaves to ExpiresString.
func withoutMetadata(out any) any {
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return out
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	for _, name := range []string{"ResultMetadata", "Expires"} {
		if f := c.Elem().FieldByName(name); f.IsValid() {
			f.SetZero()
		}
	}
	return c.Interface()
}

// sdkOnlyHeaders are the SDK's own bookkeeping (invocation id, attempt,
// user agent) and the per-signature values.
var sdkOnlyHeaders = []string{"Amz-Sdk-Invocation-Id", "Amz-Sdk-Request", "User-Agent", "Authorization", "X-Amz-Date"}

// signedHeaders is the SignedHeaders list of an Authorization header,
// without the SDK's bookkeeping headers.
func signedHeaders(auth string) []string {
	_, list, _ := strings.Cut(auth, "SignedHeaders=")
	list, _, _ = strings.Cut(list, ",")
	return slices.DeleteFunc(strings.Split(list, ";"), func(h string) bool { return strings.HasPrefix(h, "amz-sdk-") })
}

// Every method sends the request the SDK sends (method, host, escaped
// path, query, headers, body, signed headers) and decodes the answer into
// the same output, in both addressing styles.
func TestS3SendsAndReadsWhatTheSDKDoes(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, cannedS3)
	for _, pathStyle := range []bool{false, true} {
		sdk, lite := f.clients(t, pathStyle)
		for _, op := range s3Operations() {
			t.Run(fmt.Sprintf("%s path style %v", op.name, pathStyle), func(t *testing.T) {
				want, err := op.sdk(ctx, sdk)
				if err != nil {
					t.Fatalf("SDK: %v", err)
				}
				wantReq := f.take()
				got, err := op.lite(ctx, lite)
				if err != nil {
					t.Fatalf("awslite: %v", err)
				}
				gotReq := f.take()
				if len(wantReq) != 1 || len(gotReq) != 1 {
					t.Fatalf("requests: SDK %d, awslite %d", len(wantReq), len(gotReq))
				}
				w, g := wantReq[0], gotReq[0]
				if g.method != w.method || g.host != w.host || g.uri != w.uri || g.body != w.body {
					t.Errorf("request:\n got %s %s %s\n%s\nwant %s %s %s\n%s", g.method, g.host, g.uri, g.body, w.method, w.host, w.uri, w.body)
				}
				if gs, ws := signedHeaders(g.header.Get("Authorization")), signedHeaders(w.header.Get("Authorization")); !slices.Equal(gs, ws) {
					t.Errorf("signed headers:\n got %v\nwant %v", gs, ws)
				}
				for _, h := range sdkOnlyHeaders {
					g.header.Del(h)
					w.header.Del(h)
				}
				if !reflect.DeepEqual(g.header, w.header) {
					t.Errorf("headers:\n got %v\nwant %v", g.header, w.header)
				}
				if !reflect.DeepEqual(withoutMetadata(got), withoutMetadata(want)) {
					t.Errorf("output:\n got %+v\nwant %+v", withoutMetadata(got), withoutMetadata(want))
				}
			})
		}
	}
}

// A field the client would not send is refused before anything is sent.
func TestS3RefusesFieldsItDoesNotSend(t *testing.T) {
	f := newFakeS3(t, cannedS3)
	_, lite := f.clients(t, true)
	_, err := lite.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Range: aws.String("bytes=0-1")})
	if err == nil || !strings.Contains(err.Error(), "HeadObjectInput.Range is not supported") {
		t.Errorf("err = %v", err)
	}
	_, err = lite.CreateMultipartUpload(context.Background(), &s3.CreateMultipartUploadInput{Bucket: aws.String("b"), Key: aws.String("k"), ACL: types.ObjectCannedACLPrivate})
	if err == nil || !strings.Contains(err.Error(), "ACL is not supported") {
		t.Errorf("err = %v", err)
	}
	_, err = lite.AbortMultipartUpload(context.Background(), nil)
	if err == nil {
		t.Error("a nil input was accepted")
	}
	if n := len(f.take()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// s3ErrorCase is an S3 error answer and what it must become.
type s3ErrorCase struct {
	name      string
	status    int
	header    map[string]string
	body      string
	code      string
	message   string
	requestID string
	modeled   func(error) bool
	// sdkModels says the SDK gives the modeled type too; it does for
	// NotFound on HeadObject and NoSuchUpload on AbortMultipartUpload.
	sdkModels bool
}

func isNotFound(err error) bool     { var e *types.NotFound; return errors.As(err, &e) }
func isNoSuchUpload(err error) bool { var e *types.NoSuchUpload; return errors.As(err, &e) }
func isNoSuchKey(err error) bool    { var e *types.NoSuchKey; return errors.As(err, &e) }

// Error answers become *awslite.Error with S3's code, message and request
// id, the codes the SDK gives bodiless answers, and the SDK's modeled
// types where the upload service looks for them; the SDK agrees on the
// code.
func TestS3ErrorAnswers(t *testing.T) {
	cases := []s3ErrorCase{
		{name: "HEAD 404", status: 404, header: map[string]string{"X-Amz-Request-Id": "R404"}, code: "NotFound", message: "Not Found", requestID: "R404", modeled: isNotFound, sdkModels: true},
		{name: "HEAD 412", status: 412, code: "PreconditionFailed", message: "Precondition Failed"},
		{name: "HEAD 403", status: 403, code: "Forbidden", message: "Forbidden"},
		{name: "HEAD 400", status: 400, code: "BadRequest", message: "Bad Request"},
		{name: "HEAD 304", status: 304, code: "NotModified", message: "Not Modified"},
		{name: "NoSuchUpload", status: 404, header: map[string]string{"X-Amz-Request-Id": "HDR"},
			body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message><UploadId>x</UploadId><RequestId>BODY</RequestId><HostId>h</HostId></Error>`,
			code: "NoSuchUpload", message: "The specified upload does not exist.", requestID: "BODY", modeled: isNoSuchUpload, sdkModels: true},
		{name: "NoSuchKey", status: 404, body: `<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>`, code: "NoSuchKey", message: "gone", modeled: isNoSuchKey},
		{name: "PreconditionFailed", status: 412, body: `<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-Match</Condition></Error>`,
			code: "PreconditionFailed", message: "At least one of the pre-conditions you specified did not hold"},
		{name: "not XML", status: 400, body: "<html><body>bad gateway</body></html>", code: "BadRequest", message: "Bad Request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			})
			sdk, lite := f.clients(t, true)
			ctx := context.Background()
			in := &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}
			var err, sdkErr error
			if c.body == "" {
				_, err = lite.HeadObject(ctx, in)
				_, sdkErr = sdk.HeadObject(ctx, in)
			} else {
				abort := &s3.AbortMultipartUploadInput{Bucket: aws.String("b"), Key: aws.String("k"), UploadId: aws.String("u")}
				_, err = lite.AbortMultipartUpload(ctx, abort)
				_, sdkErr = sdk.AbortMultipartUpload(ctx, abort)
			}
			var e *awslite.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %T %v, not an *awslite.Error", err, err)
			}
			if e.StatusCode != c.status || e.Code != c.code || e.Message != c.message || e.RequestID != c.requestID {
				t.Errorf("got %d %q %q %q, want %d %q %q %q", e.StatusCode, e.Code, e.Message, e.RequestID, c.status, c.code, c.message, c.requestID)
			}
			if c.modeled != nil && !c.modeled(err) {
				t.Errorf("errors.As does not find the modeled error in %v", err)
			}
			var op *smithy.OperationError
			if !errors.As(err, &op) || op.Service() != "S3" {
				t.Errorf("not an S3 operation error: %v", err)
			}
			var sdkAPI smithy.APIError
			if errors.As(sdkErr, &sdkAPI) && sdkAPI.ErrorCode() != e.Code { // the SDK cannot read a body that is not XML
				t.Errorf("the SDK says %q", sdkAPI.ErrorCode())
			}
			if c.sdkModels && !c.modeled(sdkErr) {
				t.Errorf("the SDK's error %v differs in its modeled type", sdkErr)
			}
		})
	}
}

// countingS3 answers with answers[i] for the i-th request (the last one
// from then on) and counts requests.
func countingS3(t *testing.T, answers ...func(http.ResponseWriter)) (*fakeS3, *atomic.Int32) {
	var n atomic.Int32
	f := newFakeS3(t, func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		answers[min(i, len(answers)-1)](w)
	})
	return f, &n
}

func s3Answer(code int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

const completedResult = `<CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><ETag>"e-1"</ETag></CompleteMultipartUploadResult>`

const internalErrorIn200 = `<?xml version="1.0" encoding="UTF-8"?>

<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message><RequestId>R200</RequestId></Error>`

// Which answers are retried, and how often, is the SDK's S3 client's: the
// same number of attempts for each sequence of answers.
func TestS3RetriesAsTheSDK(t *testing.T) {
	complete := &s3.CompleteMultipartUploadInput{Bucket: aws.String("b"), Key: aws.String("k"), UploadId: aws.String("u"),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"e"`)}}}}
	cases := []struct {
		name     string
		answers  []func(http.ResponseWriter)
		attempts int32
		code     string // of the final error; "" for success
	}{
		{"503 then success", []func(http.ResponseWriter){s3Answer(503, ""), s3Answer(200, completedResult)}, 2, ""},
		{"SlowDown then success", []func(http.ResponseWriter){s3Answer(503, "<Error><Code>SlowDown</Code></Error>"), s3Answer(200, completedResult)}, 2, ""},
		{"an error in a 200, then success", []func(http.ResponseWriter){s3Answer(200, internalErrorIn200), s3Answer(200, completedResult)}, 2, ""},
		{"errors in 200s only", []func(http.ResponseWriter){s3Answer(200, internalErrorIn200)}, 3, "InternalError"},
		{"500s only", []func(http.ResponseWriter){s3Answer(500, "<Error><Code>InternalError</Code></Error>")}, 3, "InternalError"},
		{"RequestTimeout is retried", []func(http.ResponseWriter){s3Answer(400, "<Error><Code>RequestTimeout</Code></Error>"), s3Answer(200, completedResult)}, 2, ""},
		{"a 400 is not", []func(http.ResponseWriter){s3Answer(400, "<Error><Code>InvalidPart</Code><Message>m</Message></Error>")}, 1, "InvalidPart"},
		{"a 412 is not", []func(http.ResponseWriter){s3Answer(412, "<Error><Code>PreconditionFailed</Code></Error>")}, 1, "PreconditionFailed"},
		{"a 409 is not", []func(http.ResponseWriter){s3Answer(409, "<Error><Code>ConditionalRequestConflict</Code></Error>")}, 1, "ConditionalRequestConflict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f, sent := countingS3(t, c.answers...)
			var attempts atomic.Int32
			sdk, lite := f.clients(t, true, func(o *awslite.Options) {
				o.OnAttempt = func(_ context.Context, service, op string) {
					if service != "S3" || op != "CompleteMultipartUpload" {
						t.Errorf("attempt of %s %s", service, op)
					}
					attempts.Add(1)
				}
			})
			out, err := lite.CompleteMultipartUpload(ctx, complete)
			if got := attempts.Load(); got != c.attempts || sent.Load() != c.attempts {
				t.Errorf("%d attempts, %d requests; want %d", got, sent.Load(), c.attempts)
			}
			checkOutcome(t, "awslite", out, err, c.code)
			if c.code == "InternalError" {
				var e *awslite.Error
				if errors.As(err, &e); e == nil || e.StatusCode != 500 {
					t.Errorf("an error in a 200 is not a 500: %#v", e)
				}
			}

			sent.Store(0)
			sdkOut, sdkErr := sdk.CompleteMultipartUpload(ctx, complete)
			if sent.Load() != c.attempts {
				t.Errorf("the SDK made %d attempts", sent.Load())
			}
			checkOutcome(t, "SDK", sdkOut, sdkErr, c.code)
		})
	}
}

func checkOutcome(t *testing.T, who string, out *s3.CompleteMultipartUploadOutput, err error, code string) {
	t.Helper()
	if code == "" {
		if err != nil || out == nil || aws.ToString(out.ETag) != `"e-1"` {
			t.Errorf("%s: %+v, %v", who, out, err)
		}
		return
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != code {
		t.Errorf("%s: err = %v, want code %s", who, err, code)
	}
}

// A broken answer body is a decoding error, not a silent empty output.
func TestS3RefusesMalformedAnswers(t *testing.T) {
	f, _ := countingS3(t, s3Answer(200, "<ListPartsResult><MaxParts>many</MaxParts></ListPartsResult>"))
	_, lite := f.clients(t, true)
	_, err := lite.ListParts(context.Background(), &s3.ListPartsInput{Bucket: aws.String("b"), Key: aws.String("k"), UploadId: aws.String("u")})
	var de *smithy.DeserializationError
	if !errors.As(err, &de) {
		t.Errorf("err = %v", err)
	}
}
