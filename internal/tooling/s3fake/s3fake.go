// Package s3fake is an in-memory S3 bucket for unit tests: the SDK's
// method signatures for the calls the upload service makes, with the
// answers S3 gives them (objects with their size, ETag, checksum and stored
// headers; multipart uploads with their parts; If-Match and If-None-Match
// where the service sends them; errors shaped as the SDK returns them),
// and hooks for a test's faults. It is to S3 what memorystore.Store
// is to the table, and its conformance test runs the same cases against
// Versity Gateway, on which the integration tests run.
//
// One bucket: the bucket named in a request is not checked.
package s3fake

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// API is the part of the SDK's S3 client the upload service calls:
// upload.ObjectAPI, restated here because upload's own tests import this
// package; those tests hold the two the same.
type API interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	ListParts(ctx context.Context, in *s3.ListPartsInput, optFns ...func(*s3.Options)) (*s3.ListPartsOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

var (
	_ API = (*Client)(nil)
	_ API = (*s3.Client)(nil)
)

// Client is an in-memory bucket. The zero value is an empty bucket; set
// its fields before its first call.
type Client struct {
	// Now stamps the objects it makes (LastModified); nil is time.Now.
	Now func() time.Time
	// UploadID names the multipart uploads it creates, from their key;
	// nil is "upload-1", "upload-2", … in order.
	UploadID func(key string) string
	// Hooks stand around its operations.
	Hooks Hooks

	mu      sync.Mutex
	objects map[string]*s3.HeadObjectOutput
	uploads map[string]*multipart // by upload id
	created int
}

// multipart is an upload in progress.
type multipart struct {
	seq         int // its place in the order of creation
	key         string
	contentType *string
	algorithm   types.ChecksumAlgorithm
	parts       map[int32]types.Part
}

// Put stores head as the object at key (replacing any): what a HeadObject
// with checksums answers for it, as given (no checksum is computed).
func (c *Client) Put(key string, head s3.HeadObjectOutput) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	c.objects[key] = cloneHead(&head, true)
}

// PutPart stores part in the multipart upload in progress at key (the
// latest one created), as given: an UploadPart whose answer the test
// chooses.
func (c *Client) PutPart(key string, part types.Part) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var latest *multipart
	for _, u := range c.uploads {
		if u.key == key && (latest == nil || u.seq > latest.seq) {
			latest = u
		}
	}
	if latest == nil {
		return fmt.Errorf("s3fake: no multipart upload in progress at %q", key)
	}
	latest.parts[aws.ToInt32(part.PartNumber)] = part
	return nil
}

func (c *Client) init() {
	if c.objects == nil {
		c.objects, c.uploads = map[string]*s3.HeadObjectOutput{}, map[string]*multipart{}
	}
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// HeadObject answers the object at in.Key, its checksum only with
// ChecksumMode ENABLED; a 404 without a body (*types.NotFound) when there
// is none.
func (c *Client) HeadObject(ctx context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return call(ctx, c, c.Hooks.HeadObject, in, (*Client).headObject)
}

func (c *Client) headObject(_ context.Context, in *s3.HeadObjectInput) (*s3.HeadObjectOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	head, ok := c.objects[aws.ToString(in.Key)]
	if !ok {
		return nil, APIError("HeadObject", http.StatusNotFound, &types.NotFound{Message: aws.String("Not Found")})
	}
	return cloneHead(head, in.ChecksumMode == types.ChecksumModeEnabled), nil
}

// DeleteObject removes the object at in.Key. With If-Match, a missing
// object is NoSuchKey and another ETag PreconditionFailed; without, a
// missing object is no error.
func (c *Client) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	return call(ctx, c, c.Hooks.DeleteObject, in, (*Client).deleteObject)
}

func (c *Client) deleteObject(_ context.Context, in *s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := aws.ToString(in.Key)
	head, ok := c.objects[key]
	if in.IfMatch != nil {
		switch {
		case !ok:
			return nil, APIError("DeleteObject", http.StatusNotFound, &types.NoSuchKey{Message: aws.String("The specified key does not exist.")})
		case unquote(aws.ToString(head.ETag)) != unquote(aws.ToString(in.IfMatch)):
			return nil, preconditionFailed("DeleteObject")
		}
	}
	delete(c.objects, key)
	return &s3.DeleteObjectOutput{}, nil
}

// PutObject stores in.Body at in.Key, with S3's ETag (its MD5), its SHA-256
// when asked for (ChecksumAlgorithm or ChecksumSHA256, which must match:
// BadDigest otherwise) and its headers. If-None-Match: * keeps an existing
// object (PreconditionFailed). The service never puts; tests do, as a
// client would.
func (c *Client) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	body, err := read(in.Body)
	if err != nil {
		return nil, err
	}
	sum, err := checksum("PutObject", body, in.ChecksumSHA256, in.ChecksumAlgorithm)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	key := aws.ToString(in.Key)
	if _, exists := c.objects[key]; exists && aws.ToString(in.IfNoneMatch) == "*" {
		return nil, preconditionFailed("PutObject")
	}
	head := &s3.HeadObjectOutput{
		ContentLength: aws.Int64(int64(len(body))), ETag: aws.String(md5ETag(body)), LastModified: aws.Time(c.now()),
		ContentType: in.ContentType, ContentDisposition: in.ContentDisposition, ContentEncoding: in.ContentEncoding,
		CacheControl: in.CacheControl, ContentLanguage: in.ContentLanguage, Metadata: maps.Clone(in.Metadata),
	}
	if in.Expires != nil {
		head.ExpiresString = aws.String(in.Expires.UTC().Format(http.TimeFormat))
	}
	if sum != nil {
		head.ChecksumSHA256, head.ChecksumType = sum, types.ChecksumTypeFullObject
	}
	c.objects[key] = head
	return &s3.PutObjectOutput{ETag: head.ETag, ChecksumSHA256: sum}, nil
}

// CreateMultipartUpload begins a multipart upload at in.Key.
func (c *Client) CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	return call(ctx, c, c.Hooks.CreateMultipartUpload, in, (*Client).createMultipartUpload)
}

func (c *Client) createMultipartUpload(_ context.Context, in *s3.CreateMultipartUploadInput) (*s3.CreateMultipartUploadOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.init()
	c.created++
	key := aws.ToString(in.Key)
	id := fmt.Sprintf("upload-%d", c.created)
	if c.UploadID != nil {
		id = c.UploadID(key)
	}
	c.uploads[id] = &multipart{seq: c.created, key: key, contentType: in.ContentType, algorithm: in.ChecksumAlgorithm,
		parts: map[int32]types.Part{}}
	return &s3.CreateMultipartUploadOutput{Bucket: in.Bucket, Key: in.Key, UploadId: aws.String(id), ChecksumAlgorithm: in.ChecksumAlgorithm}, nil
}

// UploadPart stores in.Body as a part, with S3's ETag and, for an upload
// created with ChecksumAlgorithm SHA256, its SHA-256 (ChecksumSHA256, when
// given, must match: BadDigest otherwise). The service never sends parts;
// tests do, as a client would.
func (c *Client) UploadPart(_ context.Context, in *s3.UploadPartInput, _ ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	body, err := read(in.Body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	u, err := c.upload("UploadPart", in.Key, in.UploadId)
	if err != nil {
		return nil, err
	}
	sum, err := checksum("UploadPart", body, in.ChecksumSHA256, u.algorithm)
	if err != nil {
		return nil, err
	}
	n := aws.ToInt32(in.PartNumber)
	if n < 1 || n > 10000 {
		return nil, APIError("UploadPart", http.StatusBadRequest, &smithy.GenericAPIError{Code: "InvalidArgument", Message: "Part number must be an integer between 1 and 10000, inclusive"})
	}
	part := types.Part{PartNumber: aws.Int32(n), Size: aws.Int64(int64(len(body))), ETag: aws.String(md5ETag(body)),
		ChecksumSHA256: sum, LastModified: aws.Time(c.now())}
	u.parts[n] = part
	return &s3.UploadPartOutput{ETag: part.ETag, ChecksumSHA256: sum}, nil
}

// ListParts answers a page of the upload's parts in part order, from after
// PartNumberMarker, MaxParts of them (1,000 by default, as S3).
func (c *Client) ListParts(ctx context.Context, in *s3.ListPartsInput, _ ...func(*s3.Options)) (*s3.ListPartsOutput, error) {
	return call(ctx, c, c.Hooks.ListParts, in, (*Client).listParts)
}

func (c *Client) listParts(_ context.Context, in *s3.ListPartsInput) (*s3.ListPartsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, err := c.upload("ListParts", in.Key, in.UploadId)
	if err != nil {
		return nil, err
	}
	after, _ := strconv.Atoi(aws.ToString(in.PartNumberMarker))
	limit := int(aws.ToInt32(in.MaxParts))
	if in.MaxParts == nil || limit > 1000 {
		limit = 1000
	}
	out := &s3.ListPartsOutput{Bucket: in.Bucket, Key: in.Key, UploadId: in.UploadId, PartNumberMarker: in.PartNumberMarker,
		MaxParts: aws.Int32(int32(limit)), ChecksumAlgorithm: u.algorithm, IsTruncated: aws.Bool(false)}
	for _, n := range slices.Sorted(maps.Keys(u.parts)) {
		if n <= int32(after) {
			continue
		}
		if len(out.Parts) == limit {
			out.IsTruncated = aws.Bool(true)
			out.NextPartNumberMarker = aws.String(strconv.Itoa(int(aws.ToInt32(out.Parts[limit-1].PartNumber))))
			break
		}
		out.Parts = append(out.Parts, u.parts[n])
	}
	return out, nil
}

// CompleteMultipartUpload makes the object of the parts named, which must
// be in ascending order (InvalidPartOrder) and each held with its ETag and
// any checksum given (InvalidPart). The object's ETag is S3's multipart
// form (an MD5 of the parts' ETags, "-N"); for an upload with SHA256
// checksums, so is its checksum: the SHA-256 of the parts' digests,
// base64, "-N" (COMPOSITE). If-None-Match: * keeps an existing object
// (PreconditionFailed, the upload left in progress); a gone upload is
// NoSuchUpload.
func (c *Client) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	return call(ctx, c, c.Hooks.CompleteMultipartUpload, in, (*Client).completeMultipartUpload)
}

func (c *Client) completeMultipartUpload(_ context.Context, in *s3.CompleteMultipartUploadInput) (*s3.CompleteMultipartUploadOutput, error) {
	const op = "CompleteMultipartUpload"
	c.mu.Lock()
	defer c.mu.Unlock()
	u, err := c.upload(op, in.Key, in.UploadId)
	if err != nil {
		return nil, err
	}
	key := aws.ToString(in.Key)
	if _, exists := c.objects[key]; exists && aws.ToString(in.IfNoneMatch) == "*" {
		return nil, preconditionFailed(op)
	}
	var named []types.CompletedPart
	if in.MultipartUpload != nil {
		named = in.MultipartUpload.Parts
	}
	if len(named) == 0 {
		return nil, APIError(op, http.StatusBadRequest, &smithy.GenericAPIError{Code: "MalformedXML", Message: "The XML you provided was not well-formed or did not validate against our published schema."})
	}
	var size int64
	var etags, digests []byte
	for i, p := range named {
		n := aws.ToInt32(p.PartNumber)
		if i > 0 && n <= aws.ToInt32(named[i-1].PartNumber) {
			return nil, APIError(op, http.StatusBadRequest, &smithy.GenericAPIError{Code: "InvalidPartOrder", Message: "The list of parts was not in ascending order."})
		}
		held, ok := u.parts[n]
		if !ok || unquote(aws.ToString(held.ETag)) != unquote(aws.ToString(p.ETag)) ||
			p.ChecksumSHA256 != nil && aws.ToString(p.ChecksumSHA256) != aws.ToString(held.ChecksumSHA256) {
			return nil, APIError(op, http.StatusBadRequest, &smithy.GenericAPIError{Code: "InvalidPart", Message: fmt.Sprintf("One or more of the specified parts could not be found: part %d.", n)})
		}
		size += aws.ToInt64(held.Size)
		etags = append(etags, etagBytes(aws.ToString(held.ETag))...)
		digest, _ := base64.StdEncoding.DecodeString(aws.ToString(held.ChecksumSHA256))
		digests = append(digests, digest...)
	}
	md5sum := md5.Sum(etags)
	head := &s3.HeadObjectOutput{
		ContentLength: aws.Int64(size), ContentType: u.contentType, LastModified: aws.Time(c.now()),
		ETag: aws.String(fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(md5sum[:]), len(named))),
	}
	if u.algorithm == types.ChecksumAlgorithmSha256 {
		sum := sha256.Sum256(digests)
		head.ChecksumSHA256 = aws.String(fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(sum[:]), len(named)))
		head.ChecksumType = types.ChecksumTypeComposite
	}
	c.objects[key] = head
	delete(c.uploads, aws.ToString(in.UploadId))
	return &s3.CompleteMultipartUploadOutput{Bucket: in.Bucket, Key: in.Key, ETag: head.ETag,
		ChecksumSHA256: head.ChecksumSHA256, ChecksumType: head.ChecksumType}, nil
}

// AbortMultipartUpload discards the upload and its parts; a gone upload is
// NoSuchUpload.
func (c *Client) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, _ ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	return call(ctx, c, c.Hooks.AbortMultipartUpload, in, (*Client).abortMultipartUpload)
}

func (c *Client) abortMultipartUpload(_ context.Context, in *s3.AbortMultipartUploadInput) (*s3.AbortMultipartUploadOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.upload("AbortMultipartUpload", in.Key, in.UploadId); err != nil {
		return nil, err
	}
	delete(c.uploads, aws.ToString(in.UploadId))
	return &s3.AbortMultipartUploadOutput{}, nil
}

// call runs op on c, through h when there is one.
func call[In, Out any](ctx context.Context, c *Client, h Hook[In, Out], in *In, op func(*Client, context.Context, *In) (*Out, error)) (*Out, error) {
	if h == nil {
		return op(c, ctx, in)
	}
	return h(ctx, in, func(ctx context.Context, in *In) (*Out, error) { return op(c, ctx, in) })
}

// upload is the upload in progress with id at key, or S3's NoSuchUpload.
// c.mu is held.
func (c *Client) upload(op string, key, id *string) (*multipart, error) {
	u, ok := c.uploads[aws.ToString(id)]
	if !ok || u.key != aws.ToString(key) {
		return nil, APIError(op, http.StatusNotFound, &types.NoSuchUpload{Message: aws.String("The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")})
	}
	return u, nil
}

// APIError is err as the SDK returns an S3 error answer of status to op:
// inside an *smithy.OperationError and an HTTP response error, so that
// both errors.As(err, &apiErr) for a smithy.APIError (or one of the
// SDK's typed errors, such as *types.NotFound) and the HTTP status work on
// it. Hooks use it for faults.
func APIError(op string, status int, err smithy.APIError) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
			Err:      err,
		},
		RequestID: "s3fake",
	}}
}

func preconditionFailed(op string) error {
	return APIError(op, http.StatusPreconditionFailed, &smithy.GenericAPIError{Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold"})
}

// cloneHead copies head with its own pointers (a caller may change what it
// is given), with its checksum or without.
func cloneHead(head *s3.HeadObjectOutput, checksum bool) *s3.HeadObjectOutput {
	out := *head
	out.ContentLength, out.ETag, out.LastModified = clone(head.ContentLength), clone(head.ETag), clone(head.LastModified)
	out.ContentType, out.ContentDisposition, out.ContentEncoding = clone(head.ContentType), clone(head.ContentDisposition), clone(head.ContentEncoding)
	out.CacheControl, out.ContentLanguage, out.ExpiresString = clone(head.CacheControl), clone(head.ContentLanguage), clone(head.ExpiresString)
	out.ChecksumSHA256, out.Metadata = clone(head.ChecksumSHA256), maps.Clone(head.Metadata)
	if !checksum {
		out.ChecksumSHA256, out.ChecksumType = nil, ""
	}
	return &out
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func read(body io.Reader) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	return io.ReadAll(body)
}

// checksum is body's SHA-256, base64, when given or asked for; a given one
// that differs is S3's BadDigest.
func checksum(op string, body []byte, given *string, algorithm types.ChecksumAlgorithm) (*string, error) {
	if given == nil && algorithm != types.ChecksumAlgorithmSha256 {
		return nil, nil
	}
	sum := sha256.Sum256(body)
	got := base64.StdEncoding.EncodeToString(sum[:])
	if given != nil && *given != got {
		return nil, APIError(op, http.StatusBadRequest, &smithy.GenericAPIError{Code: "BadDigest", Message: "The SHA256 you specified did not match the calculated checksum."})
	}
	return &got, nil
}

func md5ETag(body []byte) string {
	sum := md5.Sum(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// etagBytes is the MD5 an ETag spells, or its text when it spells none (an
// ETag a test chose).
func etagBytes(etag string) []byte {
	if b, err := hex.DecodeString(unquote(etag)); err == nil {
		return b
	}
	return []byte(etag)
}

func unquote(etag string) string { return strings.Trim(etag, `"`) }
