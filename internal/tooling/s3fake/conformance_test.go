package s3fake_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

var versity = testenv.SharedVersity()

func TestMain(m *testing.M) { testenv.Main(m, versity) }

// bucket is what the cases call: the service's operations, and the PUTs a
// client sends.
type bucket interface {
	s3fake.API
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error)
}

// each runs f on the fake and on Versity Gateway, each with a new bucket:
// what the service's unit tests take from the fake is what the server
// does.
func each(t *testing.T, f func(t *testing.T, b bucket, name string)) {
	t.Run("fake", func(t *testing.T) { f(t, &s3fake.Client{}, "fake-bucket") })
	t.Run("versity", func(t *testing.T) {
		client := testenv.S3Client(versity.Endpoint(t), nil)
		f(t, client, testenv.NewBucket(t, client))
	})
}

// code is err's S3 error code and HTTP status; "" and 0 for no error.
func code(err error) (string, int) {
	if err == nil {
		return "", 0
	}
	var apiErr smithy.APIError
	var status interface{ HTTPStatusCode() int }
	if !errors.As(err, &apiErr) || !errors.As(err, &status) {
		return "not an S3 answer: " + err.Error(), 0
	}
	return apiErr.ErrorCode(), status.HTTPStatusCode()
}

func wantCode(t *testing.T, what string, err error, wantCode string, wantStatus int) {
	t.Helper()
	if got, status := code(err); got != wantCode || status != wantStatus {
		t.Errorf("%s: %s %d (%v), want %s %d", what, got, status, err, wantCode, wantStatus)
	}
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func md5hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// An object put with its SHA-256 and headers: HeadObject answers its
// size, ETag, the headers, and the checksum only when asked; a missing
// object is a 404 the SDK types as *types.NotFound; If-None-Match: * keeps
// it; and a delete with If-Match removes it only for its own ETag.
func TestObjects(t *testing.T) {
	each(t, func(t *testing.T, b bucket, name string) {
		ctx := context.Background()
		body := []byte("twelve bytes")
		key := "uploads/object-1"
		_, err := b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &name, Key: &key})
		var notFound *types.NotFound
		if !errors.As(err, &notFound) {
			t.Errorf("head of no object: %v, want *types.NotFound", err)
		}
		wantCode(t, "head of no object", err, "NotFound", 404)

		put := &s3.PutObjectInput{Bucket: &name, Key: &key, Body: bytes.NewReader(body), ChecksumSHA256: aws.String(sha(body)),
			ContentType: aws.String("text/plain"), ContentDisposition: aws.String(`attachment; filename="a.txt"`)}
		if _, err := b.PutObject(ctx, put); err != nil {
			t.Fatal(err)
		}
		head, err := b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &name, Key: &key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToInt64(head.ContentLength) != 12 || aws.ToString(head.ETag) != `"`+md5hex(body)+`"` || aws.ToString(head.ChecksumSHA256) != sha(body) ||
			aws.ToString(head.ContentType) != "text/plain" || aws.ToString(head.ContentDisposition) != `attachment; filename="a.txt"` || head.LastModified == nil {
			t.Errorf("head: size %d, ETag %s, sha256 %s, type %s, disposition %s, modified %v", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag),
				aws.ToString(head.ChecksumSHA256), aws.ToString(head.ContentType), aws.ToString(head.ContentDisposition), head.LastModified)
		}
		if plain, err := b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &name, Key: &key}); err != nil || plain.ChecksumSHA256 != nil {
			t.Errorf("head without ChecksumMode: sha256 %q, %v; want none", aws.ToString(plain.ChecksumSHA256), err)
		}

		again := *put
		again.Body, again.IfNoneMatch = bytes.NewReader(body), aws.String("*")
		_, err = b.PutObject(ctx, &again)
		wantCode(t, "a PUT with If-None-Match: * on an object", err, "PreconditionFailed", 412)

		_, err = b.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &name, Key: &key, IfMatch: aws.String(`"` + md5hex(nil) + `"`)})
		wantCode(t, "delete with another ETag", err, "PreconditionFailed", 412)
		if _, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &name, Key: &key, IfMatch: head.ETag}); err != nil {
			t.Fatalf("delete with its ETag: %v", err)
		}
		_, err = b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &name, Key: &key})
		wantCode(t, "head after the delete", err, "NotFound", 404)
		if _, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &name, Key: &key}); err != nil {
			t.Errorf("delete of no object: %v, want none", err)
		}
	})
}

// A multipart upload with SHA-256 checksums: parts listed page by page,
// refused out of order or with another ETag, completed into an object with
// S3's multipart ETag and composite checksum, after which the upload is
// gone; If-None-Match: * refuses to complete over an object; an abort
// discards an upload, and a second abort finds it gone.
func TestMultipartUploads(t *testing.T) {
	each(t, func(t *testing.T, b bucket, name string) {
		ctx := context.Background()
		key := "uploads/multipart-1"
		// Both of S3's smallest size but for the last, so that either order
		// passes for sizes.
		parts := [][]byte{bytes.Repeat([]byte("a"), 5<<20), bytes.Repeat([]byte("b"), 5<<20)}
		created, err := b.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &name, Key: &key,
			ContentType: aws.String("video/mp4"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		if err != nil {
			t.Fatal(err)
		}
		id := created.UploadId
		var completed []types.CompletedPart
		var etags, digests []byte
		for i, p := range parts {
			n := aws.Int32(int32(i + 1))
			out, err := b.UploadPart(ctx, &s3.UploadPartInput{Bucket: &name, Key: &key, UploadId: id, PartNumber: n,
				Body: bytes.NewReader(p), ChecksumSHA256: aws.String(sha(p))})
			if err != nil {
				t.Fatalf("part %d: %v", *n, err)
			}
			if aws.ToString(out.ETag) != `"`+md5hex(p)+`"` {
				t.Errorf("part %d: ETag %s, want its MD5", *n, aws.ToString(out.ETag))
			}
			completed = append(completed, types.CompletedPart{PartNumber: n, ETag: out.ETag, ChecksumSHA256: out.ChecksumSHA256})
			sum, digest := md5.Sum(p), sha256.Sum256(p)
			etags, digests = append(etags, sum[:]...), append(digests, digest[:]...)
		}

		var listed []string
		marker := (*string)(nil)
		for page := 1; ; page++ {
			out, err := b.ListParts(ctx, &s3.ListPartsInput{Bucket: &name, Key: &key, UploadId: id, MaxParts: aws.Int32(1), PartNumberMarker: marker})
			if err != nil || page > len(parts)+1 {
				t.Fatalf("page %d: %v", page, err)
			}
			for _, p := range out.Parts {
				listed = append(listed, fmt.Sprintf("%d:%d:%s", aws.ToInt32(p.PartNumber), aws.ToInt64(p.Size), aws.ToString(p.ChecksumSHA256)))
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			marker = out.NextPartNumberMarker
		}
		want := fmt.Sprintf("[1:%d:%s 2:%d:%s]", len(parts[0]), sha(parts[0]), len(parts[1]), sha(parts[1]))
		if fmt.Sprint(listed) != want {
			t.Errorf("listed %v, want %s", listed, want)
		}

		complete := func(parts ...types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
			return b.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &name, Key: &key, UploadId: id,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, IfNoneMatch: aws.String("*")})
		}
		_, err = complete(completed[1], completed[0])
		wantCode(t, "complete out of order", err, "InvalidPartOrder", 400)
		wrong := completed[1]
		wrong.ETag = aws.String(`"` + md5hex(nil) + `"`)
		_, err = complete(completed[0], wrong)
		wantCode(t, "complete with another ETag", err, "InvalidPart", 400)

		done, err := complete(completed...)
		if err != nil {
			t.Fatal(err)
		}
		etag, digest := md5.Sum(etags), sha256.Sum256(digests)
		wantETag := fmt.Sprintf(`"%s-2"`, hex.EncodeToString(etag[:]))
		wantSum := base64.StdEncoding.EncodeToString(digest[:]) + "-2"
		if aws.ToString(done.ETag) != wantETag || aws.ToString(done.ChecksumSHA256) != wantSum {
			t.Errorf("completed: ETag %s, sha256 %s; want %s, %s", aws.ToString(done.ETag), aws.ToString(done.ChecksumSHA256), wantETag, wantSum)
		}
		head, err := b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &name, Key: &key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || aws.ToInt64(head.ContentLength) != int64(len(parts[0])+len(parts[1])) || aws.ToString(head.ETag) != wantETag ||
			aws.ToString(head.ChecksumSHA256) != wantSum || aws.ToString(head.ContentType) != "video/mp4" {
			t.Errorf("the object: %v; size %d, ETag %s, sha256 %s, type %s", err, aws.ToInt64(head.ContentLength), aws.ToString(head.ETag),
				aws.ToString(head.ChecksumSHA256), aws.ToString(head.ContentType))
		}
		_, err = b.ListParts(ctx, &s3.ListPartsInput{Bucket: &name, Key: &key, UploadId: id})
		wantCode(t, "list a completed upload", err, "NoSuchUpload", 404)

		// Another upload at the key: If-None-Match keeps the object, and
		// the upload stays until it is aborted.
		other, err := b.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &name, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		if err != nil {
			t.Fatal(err)
		}
		id = other.UploadId
		out, err := b.UploadPart(ctx, &s3.UploadPartInput{Bucket: &name, Key: &key, UploadId: id, PartNumber: aws.Int32(1),
			Body: bytes.NewReader(parts[1]), ChecksumSHA256: aws.String(sha(parts[1]))})
		if err != nil {
			t.Fatal(err)
		}
		_, err = complete(types.CompletedPart{PartNumber: aws.Int32(1), ETag: out.ETag, ChecksumSHA256: out.ChecksumSHA256})
		wantCode(t, "complete over an object with If-None-Match: *", err, "PreconditionFailed", 412)
		if _, err := b.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &name, Key: &key, UploadId: id}); err != nil {
			t.Fatalf("abort: %v", err)
		}
		_, err = b.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &name, Key: &key, UploadId: id})
		wantCode(t, "abort again", err, "NoSuchUpload", 404)
		_, err = b.ListParts(ctx, &s3.ListPartsInput{Bucket: &name, Key: &key, UploadId: id})
		wantCode(t, "list an aborted upload", err, "NoSuchUpload", 404)
	})
}
