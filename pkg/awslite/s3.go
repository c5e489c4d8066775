package awslite

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/encoding/httpbinding"
	smithytime "github.com/aws/smithy-go/time"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3 sends the six object operations the upload service makes in S3's
// REST-XML protocol: HeadObject, DeleteObject, CreateMultipartUpload,
// ListParts, CompleteMultipartUpload and AbortMultipartUpload.
//
// Its requests and answers are this package's own types (s3_types.go),
// not the SDK's: importing the SDK's package s3, even for its types alone,
// links its endpoint rules into the binary. Each request is on the wire
// what the SDK's client sends for the same members.
type S3 struct {
	c         *client
	pathStyle bool // asked for, or forced by an endpoint that is an IP address
}

// NewS3 returns a client for cfg's region, credentials, HTTP client and
// retryer. Without a retryer of cfg's own it retries as the SDK's S3
// client does: the standard retryer as it comes, 3 attempts.
func NewS3(cfg aws.Config, optFns ...func(*Options)) (*S3, error) {
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	// The S3 client adds no retryable codes of its own: a 200 carrying an
	// error counts as a 500 (errorIn200), which the standard retryer retries.
	c, err := newClient(cfg, "S3", "s3", nil, o)
	if err != nil {
		return nil, err
	}
	host, _, _ := strings.Cut(c.endpoint.Hostname(), "%") // an IPv6 zone is not part of the address
	return &S3{c: c, pathStyle: o.UsePathStyle || net.ParseIP(host) != nil}, nil
}

// BucketEndpoint is the URL of bucket's root (scheme, host, path prefix)
// as the SDK's endpoint rules address it: virtual-hosted, the bucket in
// front of the endpoint's host, unless Options.UsePathStyle is set, the
// bucket is not a DNS label (dots, capitals, under 3 characters), or the
// endpoint's host is an IP address; then path style, the bucket as the
// path's first segment. Object keys go under it.
func (s *S3) BucketEndpoint(bucket string) url.URL {
	u := s.c.endpoint
	if !s.pathStyle && virtualHostable(bucket) {
		u.Host = bucket + "." + u.Host
		return u
	}
	return appendPath(u, bucket, true)
}

// virtualHostable reports whether bucket can be a host name label, as the
// SDK's rule (awsrulesfn.IsVirtualHostableS3Bucket, subdomains not
// allowed) decides: 3 to 63 letters, digits and hyphens, no capitals, not
// an IP address.
func virtualHostable(bucket string) bool {
	return len(bucket) >= 3 && len(bucket) <= 63 && net.ParseIP(bucket) == nil &&
		strings.ToLower(bucket) == bucket && smithyhttp.ValidHostLabel(bucket)
}

// appendPath adds a segment to u's path, escaped as the SDK escapes it
// (httpbinding.EscapePath; "/" kept unless escapeSlash), and sets RawPath
// so that the request sends, and the signer (which does not escape S3
// paths again) signs, exactly that.
func appendPath(u url.URL, segment string, escapeSlash bool) url.URL {
	escaped := EscapeKey(segment)
	if escapeSlash {
		escaped = httpbinding.EscapePath(segment, true)
	}
	raw := u.EscapedPath() + "/" + escaped
	u.Path += "/" + segment
	u.RawPath = raw
	return u
}

// EscapeKey escapes an object key for a URL path as the SDK does
// (httpbinding.EscapePath, "/" kept). A key that needs no escaping, as the
// upload service's never do, is returned as it is: EscapePath copies it
// byte by byte.
func EscapeKey(key string) string {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0) {
			return httpbinding.EscapePath(key, false)
		}
	}
	return key
}

// errNilInput refuses a nil request rather than panic on it.
var errNilInput = errors.New("nil input")

// newCall starts the call of op on an object: its URL, with query, and
// the headers the SDK sends with every S3 request.
func (s *S3) newCall(op, method, bucket, key string, query url.Values) (*call, error) {
	if bucket == "" || key == "" {
		return nil, s.c.opError(op, errors.New("a bucket and a key are required"))
	}
	cl := &call{
		op: op, method: method,
		url: appendPath(s.BucketEndpoint(bucket), key, false),
		// The SDK asks S3 not to compress answers, so lengths stay true.
		header:        http.Header{"Accept-Encoding": {"identity"}},
		failed:        errorIn200,
		errorResponse: s3Error,
	}
	cl.url.RawQuery = query.Encode() // sorted, as the SDK's encoder writes it
	return cl, nil
}

// newUploadCall is newCall for an operation on a multipart upload, which
// names it in the query.
func (s *S3) newUploadCall(op, method, bucket, key, uploadID string, query url.Values) (*call, error) {
	if uploadID == "" {
		return nil, s.c.opError(op, errors.New("an upload id is required"))
	}
	query.Set("uploadId", uploadID)
	return s.newCall(op, method, bucket, key, query)
}

// setHeader sets name to v unless v is empty: an empty member is not sent.
func setHeader(h http.Header, name, v string) {
	if v != "" {
		h.Set(name, v)
	}
}

// HeadObject reads an object's metadata. A missing object is an *Error
// with Code "NotFound" (a HEAD's answer has no body to say more).
func (s *S3) HeadObject(ctx context.Context, in *HeadObjectInput) (*HeadObjectOutput, error) {
	const op = "HeadObject"
	if in == nil {
		return nil, s.c.opError(op, errNilInput)
	}
	cl, err := s.newCall(op, http.MethodHead, in.Bucket, in.Key, nil)
	if err != nil {
		return nil, err
	}
	if in.ChecksumMode {
		cl.header.Set("X-Amz-Checksum-Mode", "ENABLED")
	}
	setHeader(cl.header, "If-Match", in.IfMatch)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	h := headerReader{h: resp.header}
	out := &HeadObjectOutput{
		ContentLength:  h.int64("Content-Length"),
		ContentType:    h.str("Content-Type"),
		ETag:           h.str("Etag"),
		LastModified:   h.httpDate("Last-Modified"),
		ChecksumSHA256: h.str("X-Amz-Checksum-Sha256"),
		ChecksumType:   h.str("X-Amz-Checksum-Type"),
		Metadata:       h.metadata(),
	}
	if h.err != nil {
		return nil, s.c.opError(op, h.err)
	}
	return out, nil
}

// DeleteObject deletes an object. An If-Match that does not match is the
// error code "PreconditionFailed".
func (s *S3) DeleteObject(ctx context.Context, in *DeleteObjectInput) error {
	const op = "DeleteObject"
	if in == nil {
		return s.c.opError(op, errNilInput)
	}
	cl, err := s.newCall(op, http.MethodDelete, in.Bucket, in.Key, url.Values{"x-id": {op}})
	if err != nil {
		return err
	}
	setHeader(cl.header, "If-Match", in.IfMatch)
	_, err = s.c.do(ctx, cl)
	return err
}

// CreateMultipartUpload starts a multipart upload.
func (s *S3) CreateMultipartUpload(ctx context.Context, in *CreateMultipartUploadInput) (*CreateMultipartUploadOutput, error) {
	const op = "CreateMultipartUpload"
	if in == nil {
		return nil, s.c.opError(op, errNilInput)
	}
	cl, err := s.newCall(op, http.MethodPost, in.Bucket, in.Key, url.Values{"uploads": {""}})
	if err != nil {
		return nil, err
	}
	setHeader(cl.header, "X-Amz-Checksum-Algorithm", in.ChecksumAlgorithm)
	setHeader(cl.header, "Content-Type", in.ContentType)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	var res struct { // InitiateMultipartUploadResult
		UploadID string `xml:"UploadId"`
	}
	if err := xml.Unmarshal(resp.body, &res); err != nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: err})
	}
	if res.UploadID == "" {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: errors.New("no UploadId in the answer")})
	}
	return &CreateMultipartUploadOutput{UploadID: res.UploadID}, nil
}

// listPartsResult is what ListParts reads of S3's ListPartsResult. Part's
// field names are S3's element names, so its Part elements decode as they
// are.
type listPartsResult struct {
	Parts                []Part `xml:"Part"`
	IsTruncated          bool
	NextPartNumberMarker string
}

// ListParts lists one page of a multipart upload's parts: to page, send
// NextPartNumberMarker as PartNumberMarker while IsTruncated.
func (s *S3) ListParts(ctx context.Context, in *ListPartsInput) (*ListPartsOutput, error) {
	const op = "ListParts"
	if in == nil {
		return nil, s.c.opError(op, errNilInput)
	}
	query := url.Values{"x-id": {op}}
	if in.MaxParts != 0 {
		query.Set("max-parts", strconv.Itoa(int(in.MaxParts)))
	}
	if in.PartNumberMarker != "" {
		query.Set("part-number-marker", in.PartNumberMarker)
	}
	cl, err := s.newUploadCall(op, http.MethodGet, in.Bucket, in.Key, in.UploadID, query)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	var res listPartsResult
	if err := xml.Unmarshal(resp.body, &res); err != nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: err})
	}
	return &ListPartsOutput{Parts: res.Parts, IsTruncated: res.IsTruncated, NextPartNumberMarker: res.NextPartNumberMarker}, nil
}

// completeMultipartUpload is the body S3 documents for
// CompleteMultipartUpload.
type completeMultipartUpload struct {
	XMLName xml.Name        `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUpload"`
	Parts   []completedPart `xml:"Part"`
}

// completedPart is a CompletedPart as the SDK writes it: its elements in
// the SDK's (alphabetical) order, an empty one left out.
type completedPart struct {
	ChecksumSHA256 string `xml:",omitempty"`
	ETag           string `xml:",omitempty"`
	PartNumber     int32  `xml:",omitempty"`
}

// CompleteMultipartUpload completes a multipart upload. S3 may answer 200
// and still fail, with an Error document: that is an error (a 500, as the
// SDK counts it, so it is retried).
func (s *S3) CompleteMultipartUpload(ctx context.Context, in *CompleteMultipartUploadInput) (*CompleteMultipartUploadOutput, error) {
	const op = "CompleteMultipartUpload"
	if in == nil {
		return nil, s.c.opError(op, errNilInput)
	}
	cl, err := s.newUploadCall(op, http.MethodPost, in.Bucket, in.Key, in.UploadID, url.Values{})
	if err != nil {
		return nil, err
	}
	if len(in.Parts) > 0 {
		doc := completeMultipartUpload{Parts: make([]completedPart, len(in.Parts))}
		for i, p := range in.Parts {
			doc.Parts[i] = completedPart{ChecksumSHA256: p.ChecksumSHA256, ETag: p.ETag, PartNumber: p.PartNumber}
		}
		body, err := xml.Marshal(doc)
		if err != nil {
			return nil, s.c.opError(op, &smithy.SerializationError{Err: err})
		}
		cl.body = body
		cl.header.Set("Content-Type", "application/xml")
	}
	if in.MpuObjectSize != 0 {
		cl.header.Set("X-Amz-Mp-Object-Size", strconv.FormatInt(in.MpuObjectSize, 10))
	}
	setHeader(cl.header, "If-None-Match", in.IfNoneMatch)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	// The output's field names are elements of CompleteMultipartUploadResult,
	// which decodes into it as it is.
	out := &CompleteMultipartUploadOutput{}
	if err := xml.Unmarshal(resp.body, out); err != nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: err})
	}
	return out, nil
}

// AbortMultipartUpload aborts a multipart upload. An unknown upload is an
// *Error with Code "NoSuchUpload".
func (s *S3) AbortMultipartUpload(ctx context.Context, in *AbortMultipartUploadInput) error {
	const op = "AbortMultipartUpload"
	if in == nil {
		return s.c.opError(op, errNilInput)
	}
	cl, err := s.newUploadCall(op, http.MethodDelete, in.Bucket, in.Key, in.UploadID, url.Values{"x-id": {op}})
	if err != nil {
		return err
	}
	_, err = s.c.do(ctx, cl)
	return err
}

// headerReader reads response headers as the SDK's deserializers do: a
// value is trimmed, a missing header is the zero value, and the first
// malformed one is kept in err.
type headerReader struct {
	h   http.Header
	err error
}

func (r *headerReader) str(name string) string { return strings.TrimSpace(r.h.Get(name)) }

func (r *headerReader) int64(name string) int64 {
	v := r.str(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		r.fail(name, err)
	}
	return n
}

func (r *headerReader) httpDate(name string) time.Time {
	v := r.str(name)
	if v == "" {
		return time.Time{}
	}
	t, err := smithytime.ParseHTTPDate(v)
	if err != nil {
		r.fail(name, err)
	}
	return t
}

// metadata collects the x-amz-meta-* headers under their lower-case
// suffixes, or returns nil when there are none, as the SDK does.
func (r *headerReader) metadata() map[string]string {
	const prefix = "X-Amz-Meta-"
	var m map[string]string
	for k, v := range r.h {
		if len(k) > len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) && len(v) > 0 {
			if m == nil {
				m = map[string]string{}
			}
			m[strings.ToLower(k[len(prefix):])] = strings.TrimSpace(v[0])
		}
	}
	return m
}

func (r *headerReader) fail(name string, err error) {
	if r.err == nil {
		r.err = &smithy.DeserializationError{Err: fmt.Errorf("header %s: %w", name, err)}
	}
}

// s3Error turns S3's error answer into an *Error: the code, message and
// request id of its XML Error document or, for an answer without one (a
// HEAD), the status as the SDK makes it a code: "NotFound" for 404,
// "PreconditionFailed" for 412.
func s3Error(resp *http.Response, body []byte) error {
	var doc struct {
		Code      string `xml:"Code"`
		Message   string `xml:"Message"`
		RequestID string `xml:"RequestId"`
	}
	_ = xml.Unmarshal(body, &doc) // an unreadable body (a proxy's page) keeps the status as its code
	e := &Error{StatusCode: resp.StatusCode, Code: doc.Code, Message: doc.Message, RequestID: doc.RequestID, Body: body}
	if e.Code == "" && e.Message == "" {
		text := http.StatusText(resp.StatusCode)
		e.Code, e.Message = strings.ReplaceAll(text, " ", ""), text
	}
	if e.Code == "" {
		e.Code = "UnknownError"
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Amz-Request-Id")
	}
	return e
}

// errorIn200 finds the error S3 can send with a 200 status, when it fails
// after it began to answer (CompleteMultipartUpload, mostly): a body whose
// root element is Error. The SDK checks every S3 answer so and takes such
// an answer for a 500, which its retryer retries; so does this client.
func errorIn200(resp *http.Response, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return nil // empty or not XML: the operation's decoding judges it
		}
		if start, ok := tok.(xml.StartElement); ok {
			if !strings.EqualFold(start.Name.Local, "Error") {
				return nil
			}
			r := *resp
			r.StatusCode = http.StatusInternalServerError
			return s3Error(&r, body)
		}
	}
}
