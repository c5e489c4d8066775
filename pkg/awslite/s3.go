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
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/encoding/httpbinding"
	smithytime "github.com/aws/smithy-go/time"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// S3 sends the six object operations the upload service makes in S3's
// REST-XML protocol. Its methods take and return the SDK's own input and
// output types, so it stands in for *s3.Client wherever a caller needs
// only these: HeadObject, DeleteObject, CreateMultipartUpload, ListParts,
// CompleteMultipartUpload and AbortMultipartUpload.
//
// Each method sends the input fields it documents, as the SDK sends them,
// and refuses an input with any other field set rather than drop it. The
// trailing ...func(*s3.Options) arguments exist to match *s3.Client's
// method set and are ignored: per-call options are this client's Options.
type S3 struct {
	c         *client
	pathStyle bool
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
	return &S3{c: c, pathStyle: o.UsePathStyle}, nil
}

// BucketEndpoint is the URL of bucket's root (scheme, host, path prefix)
// as the SDK's endpoint rules address it: virtual-hosted, the bucket in
// front of the endpoint's host, unless Options.UsePathStyle is set, the
// bucket is not a DNS label (dots, capitals, under 3 characters), or the
// endpoint's host is an IP address; then path style, the bucket as the
// path's first segment. Object keys go under it.
func (s *S3) BucketEndpoint(bucket string) url.URL {
	u := s.c.endpoint
	host, _, _ := strings.Cut(u.Hostname(), "%") // an IPv6 zone is not part of the address
	if !s.pathStyle && virtualHostable(bucket) && net.ParseIP(host) == nil {
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
	raw := u.EscapedPath() + "/" + httpbinding.EscapePath(segment, escapeSlash)
	u.Path += "/" + segment
	u.RawPath = raw
	return u
}

// newCall starts the call of op on an object: its URL, with query, and
// the headers the SDK sends with every S3 request.
func (s *S3) newCall(op, method string, bucket, key *string, query url.Values) (*call, error) {
	if bucket == nil || *bucket == "" || key == nil || *key == "" {
		return nil, s.c.opError(op, errors.New("a bucket and a key are required"))
	}
	cl := &call{
		op: op, method: method,
		url: appendPath(s.BucketEndpoint(*bucket), *key, false),
		// The SDK asks S3 not to compress answers, so lengths stay true.
		header:        http.Header{"Accept-Encoding": {"identity"}},
		failed:        errorIn200,
		errorResponse: s3Error,
	}
	cl.url.RawQuery = query.Encode() // sorted, as the SDK's encoder writes it
	return cl, nil
}

// setHeader sets name to *v unless v is nil, as the SDK does for an
// optional header field.
func setHeader(h http.Header, name string, v *string) {
	if v != nil {
		h.Set(name, *v)
	}
}

// onlyFields returns an error naming the first field of *in, a pointer to
// an operation's input, that is set but not in supported: this client
// would not send it, and a caller must not believe it was sent.
func onlyFields(in any, supported ...string) error {
	v := reflect.ValueOf(in)
	if v.IsNil() {
		return errors.New("nil input")
	}
	v = v.Elem()
	t := v.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !v.Field(i).IsZero() && !slices.Contains(supported, f.Name) {
			return fmt.Errorf("awslite: %s.%s is not supported", t.Name(), f.Name)
		}
	}
	return nil
}

// HeadObject reads an object's metadata. It sends Bucket, Key,
// ChecksumMode, IfMatch, IfNoneMatch, VersionId and ExpectedBucketOwner,
// and fills the output as the SDK does but for the deprecated Expires
// (ExpiresString has the header as sent). A missing object is an error
// that errors.As finds as *types.NotFound.
func (s *S3) HeadObject(ctx context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	const op = "HeadObject"
	if err := onlyFields(in, "Bucket", "Key", "ChecksumMode", "IfMatch", "IfNoneMatch", "VersionId", "ExpectedBucketOwner"); err != nil {
		return nil, s.c.opError(op, err)
	}
	query := url.Values{}
	if in.VersionId != nil {
		query.Set("versionId", *in.VersionId)
	}
	cl, err := s.newCall(op, http.MethodHead, in.Bucket, in.Key, query)
	if err != nil {
		return nil, err
	}
	if in.ChecksumMode != "" {
		cl.header.Set("X-Amz-Checksum-Mode", string(in.ChecksumMode))
	}
	setHeader(cl.header, "If-Match", in.IfMatch)
	setHeader(cl.header, "If-None-Match", in.IfNoneMatch)
	setHeader(cl.header, "X-Amz-Expected-Bucket-Owner", in.ExpectedBucketOwner)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	h := headerReader{h: resp.header}
	out := &s3.HeadObjectOutput{
		AcceptRanges:              h.str("Accept-Ranges"),
		ArchiveStatus:             types.ArchiveStatus(h.get("X-Amz-Archive-Status")),
		BucketKeyEnabled:          h.bool("X-Amz-Server-Side-Encryption-Bucket-Key-Enabled"),
		CacheControl:              h.str("Cache-Control"),
		ChecksumCRC32:             h.str("X-Amz-Checksum-Crc32"),
		ChecksumCRC32C:            h.str("X-Amz-Checksum-Crc32c"),
		ChecksumCRC64NVME:         h.str("X-Amz-Checksum-Crc64nvme"),
		ChecksumMD5:               h.str("X-Amz-Checksum-Md5"),
		ChecksumSHA1:              h.str("X-Amz-Checksum-Sha1"),
		ChecksumSHA256:            h.str("X-Amz-Checksum-Sha256"),
		ChecksumSHA512:            h.str("X-Amz-Checksum-Sha512"),
		ChecksumType:              types.ChecksumType(h.get("X-Amz-Checksum-Type")),
		ChecksumXXHASH128:         h.str("X-Amz-Checksum-Xxhash128"),
		ChecksumXXHASH3:           h.str("X-Amz-Checksum-Xxhash3"),
		ChecksumXXHASH64:          h.str("X-Amz-Checksum-Xxhash64"),
		ContentDisposition:        h.str("Content-Disposition"),
		ContentEncoding:           h.str("Content-Encoding"),
		ContentLanguage:           h.str("Content-Language"),
		ContentLength:             h.int64("Content-Length"),
		ContentRange:              h.str("Content-Range"),
		ContentType:               h.str("Content-Type"),
		DeleteMarker:              h.bool("X-Amz-Delete-Marker"),
		ETag:                      h.str("Etag"),
		Expiration:                h.str("X-Amz-Expiration"),
		ExpiresString:             h.str("Expires"),
		LastModified:              h.httpDate("Last-Modified"),
		Metadata:                  h.metadata(),
		MissingMeta:               h.int32("X-Amz-Missing-Meta"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatus(h.get("X-Amz-Object-Lock-Legal-Hold")),
		ObjectLockMode:            types.ObjectLockMode(h.get("X-Amz-Object-Lock-Mode")),
		PartsCount:                h.int32("X-Amz-Mp-Parts-Count"),
		ReplicationStatus:         types.ReplicationStatus(h.get("X-Amz-Replication-Status")),
		RequestCharged:            types.RequestCharged(h.get("X-Amz-Request-Charged")),
		Restore:                   h.str("X-Amz-Restore"),
		SSECustomerAlgorithm:      h.str("X-Amz-Server-Side-Encryption-Customer-Algorithm"),
		SSECustomerKeyMD5:         h.str("X-Amz-Server-Side-Encryption-Customer-Key-Md5"),
		SSEKMSKeyId:               h.str("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"),
		ServerSideEncryption:      types.ServerSideEncryption(h.get("X-Amz-Server-Side-Encryption")),
		StorageClass:              types.StorageClass(h.get("X-Amz-Storage-Class")),
		TagCount:                  h.int32("X-Amz-Tagging-Count"),
		VersionId:                 h.str("X-Amz-Version-Id"),
		WebsiteRedirectLocation:   h.str("X-Amz-Website-Redirect-Location"),
	}
	if h.err != nil {
		return nil, s.c.opError(op, h.err)
	}
	return out, nil
}

// DeleteObject deletes an object. It sends Bucket, Key, IfMatch,
// VersionId and ExpectedBucketOwner; an If-Match that does not match is
// the error code "PreconditionFailed".
func (s *S3) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	const op = "DeleteObject"
	if err := onlyFields(in, "Bucket", "Key", "IfMatch", "VersionId", "ExpectedBucketOwner"); err != nil {
		return nil, s.c.opError(op, err)
	}
	query := url.Values{"x-id": {op}}
	if in.VersionId != nil {
		query.Set("versionId", *in.VersionId)
	}
	cl, err := s.newCall(op, http.MethodDelete, in.Bucket, in.Key, query)
	if err != nil {
		return nil, err
	}
	setHeader(cl.header, "If-Match", in.IfMatch)
	setHeader(cl.header, "X-Amz-Expected-Bucket-Owner", in.ExpectedBucketOwner)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	h := headerReader{h: resp.header}
	out := &s3.DeleteObjectOutput{
		DeleteMarker:   h.bool("X-Amz-Delete-Marker"),
		RequestCharged: types.RequestCharged(h.get("X-Amz-Request-Charged")),
		VersionId:      h.str("X-Amz-Version-Id"),
	}
	if h.err != nil {
		return nil, s.c.opError(op, h.err)
	}
	return out, nil
}

// CreateMultipartUpload starts a multipart upload. It sends Bucket, Key,
// ChecksumAlgorithm, ChecksumType, ContentType, CacheControl,
// ContentDisposition, ContentEncoding, Metadata and ExpectedBucketOwner.
func (s *S3) CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	const op = "CreateMultipartUpload"
	if err := onlyFields(in, "Bucket", "Key", "ChecksumAlgorithm", "ChecksumType", "ContentType", "CacheControl",
		"ContentDisposition", "ContentEncoding", "Metadata", "ExpectedBucketOwner"); err != nil {
		return nil, s.c.opError(op, err)
	}
	cl, err := s.newCall(op, http.MethodPost, in.Bucket, in.Key, url.Values{"uploads": {""}})
	if err != nil {
		return nil, err
	}
	if in.ChecksumAlgorithm != "" {
		cl.header.Set("X-Amz-Checksum-Algorithm", string(in.ChecksumAlgorithm))
	}
	if in.ChecksumType != "" {
		cl.header.Set("X-Amz-Checksum-Type", string(in.ChecksumType))
	}
	setHeader(cl.header, "Content-Type", in.ContentType)
	setHeader(cl.header, "Cache-Control", in.CacheControl)
	setHeader(cl.header, "Content-Disposition", in.ContentDisposition)
	setHeader(cl.header, "Content-Encoding", in.ContentEncoding)
	setHeader(cl.header, "X-Amz-Expected-Bucket-Owner", in.ExpectedBucketOwner)
	for k, v := range in.Metadata {
		cl.header.Set("X-Amz-Meta-"+k, v)
	}
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	// InitiateMultipartUploadResult's elements (Bucket, Key, UploadId) are
	// the output's field names; the rest of the output is in headers.
	out := &s3.CreateMultipartUploadOutput{}
	if err := xml.Unmarshal(resp.body, out); err != nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: err})
	}
	h := headerReader{h: resp.header}
	out.AbortDate = h.httpDate("X-Amz-Abort-Date")
	out.AbortRuleId = h.str("X-Amz-Abort-Rule-Id")
	out.BucketKeyEnabled = h.bool("X-Amz-Server-Side-Encryption-Bucket-Key-Enabled")
	out.ChecksumAlgorithm = types.ChecksumAlgorithm(h.get("X-Amz-Checksum-Algorithm"))
	out.ChecksumType = types.ChecksumType(h.get("X-Amz-Checksum-Type"))
	out.RequestCharged = types.RequestCharged(h.get("X-Amz-Request-Charged"))
	out.SSECustomerAlgorithm = h.str("X-Amz-Server-Side-Encryption-Customer-Algorithm")
	out.SSECustomerKeyMD5 = h.str("X-Amz-Server-Side-Encryption-Customer-Key-Md5")
	out.SSEKMSEncryptionContext = h.str("X-Amz-Server-Side-Encryption-Context")
	out.SSEKMSKeyId = h.str("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id")
	out.ServerSideEncryption = types.ServerSideEncryption(h.get("X-Amz-Server-Side-Encryption"))
	if h.err != nil {
		return nil, s.c.opError(op, h.err)
	}
	if out.UploadId == nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: errors.New("no UploadId in the answer")})
	}
	return out, nil
}

// listPartsResult is S3's ListPartsResult. Its Part elements decode into
// types.Part as they are: that type's field names are S3's element names.
type listPartsResult struct {
	Bucket               *string                 `xml:"Bucket"`
	Key                  *string                 `xml:"Key"`
	UploadID             *string                 `xml:"UploadId"`
	PartNumberMarker     *string                 `xml:"PartNumberMarker"`
	NextPartNumberMarker *string                 `xml:"NextPartNumberMarker"`
	MaxParts             *int32                  `xml:"MaxParts"`
	IsTruncated          *bool                   `xml:"IsTruncated"`
	Parts                []types.Part            `xml:"Part"`
	Initiator            *types.Initiator        `xml:"Initiator"`
	Owner                *types.Owner            `xml:"Owner"`
	StorageClass         types.StorageClass      `xml:"StorageClass"`
	ChecksumAlgorithm    types.ChecksumAlgorithm `xml:"ChecksumAlgorithm"`
	ChecksumType         types.ChecksumType      `xml:"ChecksumType"`
}

// ListParts lists one page of a multipart upload's parts. It sends
// Bucket, Key, UploadId, MaxParts, PartNumberMarker and
// ExpectedBucketOwner, so s3.NewListPartsPaginator pages with it.
func (s *S3) ListParts(ctx context.Context, in *s3.ListPartsInput, _ ...func(*s3.Options)) (*s3.ListPartsOutput, error) {
	const op = "ListParts"
	if err := onlyFields(in, "Bucket", "Key", "UploadId", "MaxParts", "PartNumberMarker", "ExpectedBucketOwner"); err != nil {
		return nil, s.c.opError(op, err)
	}
	if in.UploadId == nil {
		return nil, s.c.opError(op, errors.New("an upload id is required"))
	}
	query := url.Values{"x-id": {op}, "uploadId": {*in.UploadId}}
	if in.MaxParts != nil {
		query.Set("max-parts", strconv.Itoa(int(*in.MaxParts)))
	}
	if in.PartNumberMarker != nil {
		query.Set("part-number-marker", *in.PartNumberMarker)
	}
	cl, err := s.newCall(op, http.MethodGet, in.Bucket, in.Key, query)
	if err != nil {
		return nil, err
	}
	setHeader(cl.header, "X-Amz-Expected-Bucket-Owner", in.ExpectedBucketOwner)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	var res listPartsResult
	if err := xml.Unmarshal(resp.body, &res); err != nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: err})
	}
	h := headerReader{h: resp.header}
	out := &s3.ListPartsOutput{
		AbortDate: h.httpDate("X-Amz-Abort-Date"), AbortRuleId: h.str("X-Amz-Abort-Rule-Id"),
		Bucket: res.Bucket, Key: res.Key, UploadId: res.UploadID,
		PartNumberMarker: res.PartNumberMarker, NextPartNumberMarker: res.NextPartNumberMarker,
		MaxParts: res.MaxParts, IsTruncated: res.IsTruncated, Parts: res.Parts,
		Initiator: res.Initiator, Owner: res.Owner, StorageClass: res.StorageClass,
		ChecksumAlgorithm: res.ChecksumAlgorithm, ChecksumType: res.ChecksumType,
		RequestCharged: types.RequestCharged(h.get("X-Amz-Request-Charged")),
	}
	if h.err != nil {
		return nil, s.c.opError(op, h.err)
	}
	return out, nil
}

// completeMultipartUpload is the body S3 documents for
// CompleteMultipartUpload. types.CompletedPart's field names are S3's
// element names, in the order the SDK writes them, so encoding/xml writes
// each part as the SDK does, every checksum included.
type completeMultipartUpload struct {
	XMLName xml.Name              `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUpload"`
	Parts   []types.CompletedPart `xml:"Part"`
}

// CompleteMultipartUpload completes a multipart upload. It sends Bucket,
// Key, UploadId, MultipartUpload, MpuObjectSize, IfMatch, IfNoneMatch,
// ChecksumSHA256, ChecksumType and ExpectedBucketOwner. S3 may answer 200
// and still fail, with an Error document: that is an error (a 500, as the
// SDK counts it, so it is retried).
func (s *S3) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	const op = "CompleteMultipartUpload"
	if err := onlyFields(in, "Bucket", "Key", "UploadId", "MultipartUpload", "MpuObjectSize", "IfMatch", "IfNoneMatch",
		"ChecksumSHA256", "ChecksumType", "ExpectedBucketOwner"); err != nil {
		return nil, s.c.opError(op, err)
	}
	if in.UploadId == nil {
		return nil, s.c.opError(op, errors.New("an upload id is required"))
	}
	cl, err := s.newCall(op, http.MethodPost, in.Bucket, in.Key, url.Values{"uploadId": {*in.UploadId}})
	if err != nil {
		return nil, err
	}
	if in.MultipartUpload != nil {
		body, err := xml.Marshal(completeMultipartUpload{Parts: in.MultipartUpload.Parts})
		if err != nil {
			return nil, s.c.opError(op, &smithy.SerializationError{Err: err})
		}
		cl.body = body
		cl.header.Set("Content-Type", "application/xml")
	}
	if in.MpuObjectSize != nil {
		cl.header.Set("X-Amz-Mp-Object-Size", strconv.FormatInt(*in.MpuObjectSize, 10))
	}
	if in.ChecksumType != "" {
		cl.header.Set("X-Amz-Checksum-Type", string(in.ChecksumType))
	}
	setHeader(cl.header, "X-Amz-Checksum-Sha256", in.ChecksumSHA256)
	setHeader(cl.header, "If-Match", in.IfMatch)
	setHeader(cl.header, "If-None-Match", in.IfNoneMatch)
	setHeader(cl.header, "X-Amz-Expected-Bucket-Owner", in.ExpectedBucketOwner)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	// CompleteMultipartUploadResult's elements (Location, Bucket, Key,
	// ETag, the checksums and ChecksumType) are the output's field names;
	// the rest of the output is in headers.
	out := &s3.CompleteMultipartUploadOutput{}
	if err := xml.Unmarshal(resp.body, out); err != nil {
		return nil, s.c.opError(op, &smithy.DeserializationError{Err: err})
	}
	h := headerReader{h: resp.header}
	out.BucketKeyEnabled = h.bool("X-Amz-Server-Side-Encryption-Bucket-Key-Enabled")
	out.Expiration = h.str("X-Amz-Expiration")
	out.RequestCharged = types.RequestCharged(h.get("X-Amz-Request-Charged"))
	out.SSEKMSKeyId = h.str("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id")
	out.ServerSideEncryption = types.ServerSideEncryption(h.get("X-Amz-Server-Side-Encryption"))
	out.VersionId = h.str("X-Amz-Version-Id")
	if h.err != nil {
		return nil, s.c.opError(op, h.err)
	}
	return out, nil
}

// AbortMultipartUpload aborts a multipart upload. It sends Bucket, Key,
// UploadId and ExpectedBucketOwner. An unknown upload is an error that
// errors.As finds as *types.NoSuchUpload.
func (s *S3) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, _ ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	const op = "AbortMultipartUpload"
	if err := onlyFields(in, "Bucket", "Key", "UploadId", "ExpectedBucketOwner"); err != nil {
		return nil, s.c.opError(op, err)
	}
	if in.UploadId == nil {
		return nil, s.c.opError(op, errors.New("an upload id is required"))
	}
	cl, err := s.newCall(op, http.MethodDelete, in.Bucket, in.Key, url.Values{"x-id": {op}, "uploadId": {*in.UploadId}})
	if err != nil {
		return nil, err
	}
	setHeader(cl.header, "X-Amz-Expected-Bucket-Owner", in.ExpectedBucketOwner)
	resp, err := s.c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	return &s3.AbortMultipartUploadOutput{RequestCharged: types.RequestCharged(resp.header.Get("X-Amz-Request-Charged"))}, nil
}

// headerReader reads response headers into output fields as the SDK's
// deserializers do: a missing header leaves its field nil, a value is
// trimmed, and the first malformed one is kept in err.
type headerReader struct {
	h   http.Header
	err error
}

func (r *headerReader) get(name string) string { return strings.TrimSpace(r.h.Get(name)) }

func (r *headerReader) str(name string) *string {
	if len(r.h.Values(name)) == 0 {
		return nil
	}
	v := r.get(name)
	return &v
}

func (r *headerReader) int64(name string) *int64 {
	v := r.str(name)
	if v == nil {
		return nil
	}
	n, err := strconv.ParseInt(*v, 0, 64)
	if err != nil {
		r.fail(name, err)
		return nil
	}
	return &n
}

func (r *headerReader) int32(name string) *int32 {
	v := r.str(name)
	if v == nil {
		return nil
	}
	n, err := strconv.ParseInt(*v, 0, 32)
	if err != nil {
		r.fail(name, err)
		return nil
	}
	n32 := int32(n)
	return &n32
}

func (r *headerReader) bool(name string) *bool {
	v := r.str(name)
	if v == nil {
		return nil
	}
	b, err := strconv.ParseBool(*v)
	if err != nil {
		r.fail(name, err)
		return nil
	}
	return &b
}

func (r *headerReader) httpDate(name string) *time.Time {
	v := r.str(name)
	if v == nil {
		return nil
	}
	t, err := smithytime.ParseHTTPDate(*v)
	if err != nil {
		r.fail(name, err)
		return nil
	}
	return &t
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
// "PreconditionFailed" for 412. Codes that pkg/upload tests for with
// errors.As carry the SDK's modeled error in Err.
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
	e.Err = modeledError(e.Code, doc.Message)
	return e
}

// modeledError is the SDK's type for the codes callers look for, with the
// message of the error document (none for a HEAD's bodiless 404, as with
// the SDK). The SDK models NotFound for HeadObject and NoSuchUpload for
// AbortMultipartUpload only; they are given here on every operation, which
// only makes errors.As find what the code already says.
func modeledError(code, message string) error {
	var msg *string
	if message != "" {
		msg = &message
	}
	switch {
	case strings.EqualFold(code, "NotFound"):
		return &types.NotFound{Message: msg}
	case strings.EqualFold(code, "NoSuchUpload"):
		return &types.NoSuchUpload{Message: msg}
	case strings.EqualFold(code, "NoSuchKey"):
		return &types.NoSuchKey{Message: msg}
	}
	return nil
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
