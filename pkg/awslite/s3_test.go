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
	"github.com/aws/smithy-go/encoding/httpbinding"

	"github.com/onceupload/onceupload/pkg/awslite"
)

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

// The SDK's inputs for awslite's, and awslite's outputs for the SDK's, so
// that both clients send the same request and their answers compare: an
// empty string or zero is a member left out (nil).

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optInt32(n int32) *int32 {
	if n == 0 {
		return nil
	}
	return &n
}

func optInt64(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

func sdkHeadInput(in *awslite.HeadObjectInput) *s3.HeadObjectInput {
	out := &s3.HeadObjectInput{Bucket: optString(in.Bucket), Key: optString(in.Key), IfMatch: optString(in.IfMatch)}
	if in.ChecksumMode {
		out.ChecksumMode = types.ChecksumModeEnabled
	}
	return out
}

func liteHeadOutput(out *s3.HeadObjectOutput) *awslite.HeadObjectOutput {
	return &awslite.HeadObjectOutput{
		ContentLength: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType), ETag: aws.ToString(out.ETag),
		LastModified: aws.ToTime(out.LastModified), ChecksumSHA256: aws.ToString(out.ChecksumSHA256),
		ChecksumType: string(out.ChecksumType), Metadata: out.Metadata,
	}
}

func sdkDeleteInput(in *awslite.DeleteObjectInput) *s3.DeleteObjectInput {
	return &s3.DeleteObjectInput{Bucket: optString(in.Bucket), Key: optString(in.Key), IfMatch: optString(in.IfMatch)}
}

func sdkCreateInput(in *awslite.CreateMultipartUploadInput) *s3.CreateMultipartUploadInput {
	return &s3.CreateMultipartUploadInput{Bucket: optString(in.Bucket), Key: optString(in.Key),
		ContentType: optString(in.ContentType), ChecksumAlgorithm: types.ChecksumAlgorithm(in.ChecksumAlgorithm)}
}

func liteCreateOutput(out *s3.CreateMultipartUploadOutput) *awslite.CreateMultipartUploadOutput {
	return &awslite.CreateMultipartUploadOutput{UploadID: aws.ToString(out.UploadId)}
}

func sdkListInput(in *awslite.ListPartsInput) *s3.ListPartsInput {
	return &s3.ListPartsInput{Bucket: optString(in.Bucket), Key: optString(in.Key), UploadId: optString(in.UploadID),
		MaxParts: optInt32(in.MaxParts), PartNumberMarker: optString(in.PartNumberMarker)}
}

func liteParts(parts []types.Part) []awslite.Part {
	var out []awslite.Part
	for _, p := range parts {
		out = append(out, awslite.Part{PartNumber: aws.ToInt32(p.PartNumber), Size: aws.ToInt64(p.Size), ETag: aws.ToString(p.ETag),
			ChecksumSHA256: aws.ToString(p.ChecksumSHA256), LastModified: aws.ToTime(p.LastModified)})
	}
	return out
}

func liteListOutput(out *s3.ListPartsOutput) *awslite.ListPartsOutput {
	return &awslite.ListPartsOutput{Parts: liteParts(out.Parts), IsTruncated: aws.ToBool(out.IsTruncated),
		NextPartNumberMarker: aws.ToString(out.NextPartNumberMarker)}
}

func sdkCompleteInput(in *awslite.CompleteMultipartUploadInput) *s3.CompleteMultipartUploadInput {
	out := &s3.CompleteMultipartUploadInput{Bucket: optString(in.Bucket), Key: optString(in.Key), UploadId: optString(in.UploadID),
		MpuObjectSize: optInt64(in.MpuObjectSize), IfNoneMatch: optString(in.IfNoneMatch)}
	if len(in.Parts) > 0 {
		out.MultipartUpload = &types.CompletedMultipartUpload{}
		for _, p := range in.Parts {
			out.MultipartUpload.Parts = append(out.MultipartUpload.Parts, types.CompletedPart{
				PartNumber: optInt32(p.PartNumber), ETag: optString(p.ETag), ChecksumSHA256: optString(p.ChecksumSHA256)})
		}
	}
	return out
}

func liteCompleteOutput(out *s3.CompleteMultipartUploadOutput) *awslite.CompleteMultipartUploadOutput {
	return &awslite.CompleteMultipartUploadOutput{Location: aws.ToString(out.Location), ETag: aws.ToString(out.ETag),
		ChecksumSHA256: aws.ToString(out.ChecksumSHA256), ChecksumType: string(out.ChecksumType)}
}

func sdkAbortInput(in *awslite.AbortMultipartUploadInput) *s3.AbortMultipartUploadInput {
	return &s3.AbortMultipartUploadInput{Bucket: optString(in.Bucket), Key: optString(in.Key), UploadId: optString(in.UploadID)}
}

// sdkResult is an SDK call's output mapped to awslite's type, or its error.
func sdkResult[O, L any](out *O, err error, lite func(*O) L) (any, error) {
	if err != nil {
		return nil, err
	}
	return lite(out), nil
}

// s3Operation is one call made with the SDK's client or with awslite; an
// operation without an output returns nil.
type s3Operation struct {
	name string
	sdk  func(context.Context, *s3.Client) (any, error)
	lite func(context.Context, *awslite.S3) (any, error)
}

// s3Operations sends every method with every input member set, on a key
// that needs escaping.
func s3Operations() []s3Operation {
	const bucket, key, uploadID = "my-bucket", "in/a b+c%é/~x", "VXBsb2Fk+/="
	head := &awslite.HeadObjectInput{Bucket: bucket, Key: key, ChecksumMode: true, IfMatch: `"abc"`}
	del := &awslite.DeleteObjectInput{Bucket: bucket, Key: key, IfMatch: `"abc"`}
	create := &awslite.CreateMultipartUploadInput{Bucket: bucket, Key: key, ContentType: "image/png; q=1",
		ChecksumAlgorithm: awslite.ChecksumSHA256Algorithm}
	list := &awslite.ListPartsInput{Bucket: bucket, Key: key, UploadID: uploadID, MaxParts: 2, PartNumberMarker: "1"}
	complete := &awslite.CompleteMultipartUploadInput{Bucket: bucket, Key: key, UploadID: uploadID,
		Parts: []awslite.CompletedPart{
			{PartNumber: 1, ETag: `"7778aef83f66abc1fa1e8477f296d394"`, ChecksumSHA256: "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="},
			{PartNumber: 2, ETag: `"a&b<c>'"`},
		},
		MpuObjectSize: 5242881, IfNoneMatch: "*"}
	abort := &awslite.AbortMultipartUploadInput{Bucket: bucket, Key: key, UploadID: uploadID}
	return []s3Operation{
		{"HeadObject",
			func(ctx context.Context, c *s3.Client) (any, error) {
				out, err := c.HeadObject(ctx, sdkHeadInput(head))
				return sdkResult(out, err, liteHeadOutput)
			},
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.HeadObject(ctx, head) }},
		{"DeleteObject",
			func(ctx context.Context, c *s3.Client) (any, error) {
				_, err := c.DeleteObject(ctx, sdkDeleteInput(del))
				return nil, err
			},
			func(ctx context.Context, c *awslite.S3) (any, error) { return nil, c.DeleteObject(ctx, del) }},
		{"CreateMultipartUpload",
			func(ctx context.Context, c *s3.Client) (any, error) {
				out, err := c.CreateMultipartUpload(ctx, sdkCreateInput(create))
				return sdkResult(out, err, liteCreateOutput)
			},
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.CreateMultipartUpload(ctx, create) }},
		{"ListParts",
			func(ctx context.Context, c *s3.Client) (any, error) {
				out, err := c.ListParts(ctx, sdkListInput(list))
				return sdkResult(out, err, liteListOutput)
			},
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.ListParts(ctx, list) }},
		{"CompleteMultipartUpload",
			func(ctx context.Context, c *s3.Client) (any, error) {
				out, err := c.CompleteMultipartUpload(ctx, sdkCompleteInput(complete))
				return sdkResult(out, err, liteCompleteOutput)
			},
			func(ctx context.Context, c *awslite.S3) (any, error) { return c.CompleteMultipartUpload(ctx, complete) }},
		{"AbortMultipartUpload",
			func(ctx context.Context, c *s3.Client) (any, error) {
				_, err := c.AbortMultipartUpload(ctx, sdkAbortInput(abort))
				return nil, err
			},
			func(ctx context.Context, c *awslite.S3) (any, error) { return nil, c.AbortMultipartUpload(ctx, abort) }},
	}
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
				if !reflect.DeepEqual(got, want) {
					t.Errorf("output:\n got %+v\nwant %+v", got, want)
				}
			})
		}
	}
}

// An incomplete request is refused before anything is sent.
func TestS3RefusesIncompleteInputs(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t, cannedS3)
	_, lite := f.clients(t, true)
	cases := []struct {
		name string
		call func() error
	}{
		{"nil input", func() error { _, err := lite.HeadObject(ctx, nil); return err }},
		{"nil input without output", func() error { return lite.AbortMultipartUpload(ctx, nil) }},
		{"no key", func() error { return lite.DeleteObject(ctx, &awslite.DeleteObjectInput{Bucket: "b"}) }},
		{"no bucket", func() error {
			_, err := lite.CreateMultipartUpload(ctx, &awslite.CreateMultipartUploadInput{Key: "k"})
			return err
		}},
		{"no upload to list", func() error {
			_, err := lite.ListParts(ctx, &awslite.ListPartsInput{Bucket: "b", Key: "k"})
			return err
		}},
		{"no upload to complete", func() error {
			_, err := lite.CompleteMultipartUpload(ctx, &awslite.CompleteMultipartUploadInput{Bucket: "b", Key: "k"})
			return err
		}},
		{"no upload to abort", func() error {
			return lite.AbortMultipartUpload(ctx, &awslite.AbortMultipartUploadInput{Bucket: "b", Key: "k"})
		}},
	}
	for _, c := range cases {
		var op *smithy.OperationError
		if err := c.call(); !errors.As(err, &op) || op.Service() != "S3" {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
	if n := len(f.take()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// An answer without the optional headers leaves their members zero, as
// the SDK leaves its nil, and its metadata nil.
func TestS3HeadObjectWithoutOptionalHeaders(t *testing.T) {
	f := newFakeS3(t, func(w http.ResponseWriter, _ *http.Request) { w.Header()["Content-Type"] = nil })
	_, lite := f.clients(t, true)
	got, err := lite.HeadObject(context.Background(), &awslite.HeadObjectInput{Bucket: "b", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (awslite.HeadObjectOutput{}); !reflect.DeepEqual(*got, want) {
		t.Errorf("got %+v, want %+v", *got, want)
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
}

// Error answers become *awslite.Error with S3's code, message and request
// id, or the codes the SDK gives bodiless answers (NotFound for a HEAD's
// 404, which the upload service looks for); the SDK agrees on the code.
func TestS3ErrorAnswers(t *testing.T) {
	cases := []s3ErrorCase{
		{name: "HEAD 404", status: 404, header: map[string]string{"X-Amz-Request-Id": "R404"}, code: "NotFound", message: "Not Found", requestID: "R404"},
		{name: "HEAD 412", status: 412, code: "PreconditionFailed", message: "Precondition Failed"},
		{name: "HEAD 403", status: 403, code: "Forbidden", message: "Forbidden"},
		{name: "HEAD 400", status: 400, code: "BadRequest", message: "Bad Request"},
		{name: "HEAD 304", status: 304, code: "NotModified", message: "Not Modified"},
		{name: "NoSuchUpload", status: 404, header: map[string]string{"X-Amz-Request-Id": "HDR"},
			body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message><UploadId>x</UploadId><RequestId>BODY</RequestId><HostId>h</HostId></Error>`,
			code: "NoSuchUpload", message: "The specified upload does not exist.", requestID: "BODY"},
		{name: "NoSuchKey", status: 404, body: `<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>`, code: "NoSuchKey", message: "gone"},
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
			var err, sdkErr error
			if c.body == "" {
				in := &awslite.HeadObjectInput{Bucket: "b", Key: "k"}
				_, err = lite.HeadObject(ctx, in)
				_, sdkErr = sdk.HeadObject(ctx, sdkHeadInput(in))
			} else {
				abort := &awslite.AbortMultipartUploadInput{Bucket: "b", Key: "k", UploadID: "u"}
				err = lite.AbortMultipartUpload(ctx, abort)
				_, sdkErr = sdk.AbortMultipartUpload(ctx, sdkAbortInput(abort))
			}
			var e *awslite.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %T %v, not an *awslite.Error", err, err)
			}
			if e.StatusCode != c.status || e.Code != c.code || e.Message != c.message || e.RequestID != c.requestID {
				t.Errorf("got %d %q %q %q, want %d %q %q %q", e.StatusCode, e.Code, e.Message, e.RequestID, c.status, c.code, c.message, c.requestID)
			}
			var op *smithy.OperationError
			if !errors.As(err, &op) || op.Service() != "S3" {
				t.Errorf("not an S3 operation error: %v", err)
			}
			var sdkAPI smithy.APIError
			if errors.As(sdkErr, &sdkAPI) && sdkAPI.ErrorCode() != e.Code { // the SDK cannot read a body that is not XML
				t.Errorf("the SDK says %q", sdkAPI.ErrorCode())
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
	complete := &awslite.CompleteMultipartUploadInput{Bucket: "b", Key: "k", UploadID: "u",
		Parts: []awslite.CompletedPart{{PartNumber: 1, ETag: `"e"`}}}
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
			var etag string
			if out != nil {
				etag = out.ETag
			}
			checkOutcome(t, "awslite", etag, err, c.code)
			if c.code == "InternalError" {
				var e *awslite.Error
				if errors.As(err, &e); e == nil || e.StatusCode != 500 {
					t.Errorf("an error in a 200 is not a 500: %#v", e)
				}
			}

			sent.Store(0)
			sdkOut, sdkErr := sdk.CompleteMultipartUpload(ctx, sdkCompleteInput(complete))
			if sent.Load() != c.attempts {
				t.Errorf("the SDK made %d attempts", sent.Load())
			}
			etag = ""
			if sdkOut != nil {
				etag = aws.ToString(sdkOut.ETag)
			}
			checkOutcome(t, "SDK", etag, sdkErr, c.code)
		})
	}
}

// checkOutcome fails t unless a Complete succeeded with the ETag
// completedResult has (code "") or failed with code.
func checkOutcome(t *testing.T, who, etag string, err error, code string) {
	t.Helper()
	if code == "" {
		if err != nil || etag != `"e-1"` {
			t.Errorf("%s: ETag %s, %v", who, etag, err)
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
	ctx := context.Background()
	f, _ := countingS3(t,
		s3Answer(200, "<ListPartsResult><Part><PartNumber>1</PartNumber><Size>many</Size></Part></ListPartsResult>"),
		s3Answer(200, "<InitiateMultipartUploadResult><Bucket>b</Bucket></InitiateMultipartUploadResult>"),
		s3Answer(200, "<CompleteMultipartUploadResult><ETag>"),
		func(w http.ResponseWriter) { w.Header().Set("Last-Modified", "yesterday") })
	_, lite := f.clients(t, true)
	_, listErr := lite.ListParts(ctx, &awslite.ListPartsInput{Bucket: "b", Key: "k", UploadID: "u"})
	_, createErr := lite.CreateMultipartUpload(ctx, &awslite.CreateMultipartUploadInput{Bucket: "b", Key: "k"})
	_, completeErr := lite.CompleteMultipartUpload(ctx, &awslite.CompleteMultipartUploadInput{Bucket: "b", Key: "k", UploadID: "u"})
	_, headErr := lite.HeadObject(ctx, &awslite.HeadObjectInput{Bucket: "b", Key: "k"})
	for i, err := range []error{listErr, createErr, completeErr, headErr} {
		var de *smithy.DeserializationError
		if !errors.As(err, &de) {
			t.Errorf("answer %d: err = %v", i, err)
		}
	}
}

// EscapeKey is EscapePath's answer for every byte, its fast path included.
func TestEscapeKeyIsTheSDKs(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	for _, key := range []string{"uploads/0123abcdef", "a-b.c_d~e/f", string(all), "in/sub dir/a+b%c é.txt", ""} {
		if got, want := awslite.EscapeKey(key), httpbinding.EscapePath(key, false); got != want {
			t.Errorf("awslite.EscapeKey(%q) = %q, want %q", key, got, want)
		}
	}
}
