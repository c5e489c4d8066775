package s3fake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
)

// What a test sets up by hand: objects and parts as given, upload ids and
// times of its choosing; the answers it reads are its own copies.
func TestSeeding(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := &s3fake.Client{Now: func() time.Time { return at }, UploadID: func(key string) string { return "id-of-" + key }}
	c.Put("a", s3.HeadObjectOutput{ContentLength: aws.Int64(3), ETag: aws.String(`"e"`), ChecksumSHA256: aws.String("sum")})
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Key: aws.String("a"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToInt64(head.ContentLength) != 3 || aws.ToString(head.ETag) != `"e"` || aws.ToString(head.ChecksumSHA256) != "sum" {
		t.Fatalf("head %+v, %v", head, err)
	}
	*head.ETag = "changed"
	if again, _ := c.HeadObject(ctx, &s3.HeadObjectInput{Key: aws.String("a")}); aws.ToString(again.ETag) != `"e"` {
		t.Errorf("an answer changed by its caller changed the object: %s", aws.ToString(again.ETag))
	}

	if err := c.PutPart("b", types.Part{PartNumber: aws.Int32(1)}); err == nil {
		t.Error("a part without an upload was stored")
	}
	created, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Key: aws.String("b"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil || aws.ToString(created.UploadId) != "id-of-b" {
		t.Fatalf("create: %v %v", created, err)
	}
	part := types.Part{PartNumber: aws.Int32(1), Size: aws.Int64(7), ETag: aws.String(`"p"`), ChecksumSHA256: aws.String("AAAA")}
	if err := c.PutPart("b", part); err != nil {
		t.Fatal(err)
	}
	done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Key: aws.String("b"), UploadId: created.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"p"`)}}}})
	if err != nil {
		t.Fatal(err)
	}
	head, err = c.HeadObject(ctx, &s3.HeadObjectInput{Key: aws.String("b"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToInt64(head.ContentLength) != 7 || aws.ToString(head.ETag) != aws.ToString(done.ETag) ||
		aws.ToString(head.ChecksumSHA256) != aws.ToString(done.ChecksumSHA256) || !aws.ToTime(head.LastModified).Equal(at) {
		t.Errorf("completed object %+v, %v; completed as %+v", head, err, done)
	}
}

// A hook stands around its operation: it can refuse the call, count it,
// and change what the operation answers.
func TestHooks(t *testing.T) {
	ctx := context.Background()
	c := &s3fake.Client{}
	refused := s3fake.APIError("CreateMultipartUpload", 503, &types.NoSuchBucket{})
	calls := 0
	c.Hooks.CreateMultipartUpload = func(ctx context.Context, in *s3.CreateMultipartUploadInput, next s3fake.Next[s3.CreateMultipartUploadInput, s3.CreateMultipartUploadOutput]) (*s3.CreateMultipartUploadOutput, error) {
		calls++
		if calls == 1 {
			return nil, refused
		}
		out, err := next(ctx, in)
		if err == nil {
			out.UploadId = aws.String("renamed " + aws.ToString(out.UploadId))
		}
		return out, err
	}
	var noSuchBucket *types.NoSuchBucket
	if _, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Key: aws.String("k")}); !errors.As(err, &noSuchBucket) {
		t.Errorf("the refused call: %v", err)
	}
	out, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Key: aws.String("k")})
	if err != nil || aws.ToString(out.UploadId) != "renamed upload-1" || calls != 2 {
		t.Errorf("the call let through: %v %v, %d calls", out, err, calls)
	}
	if _, err := c.ListParts(ctx, &s3.ListPartsInput{Key: aws.String("k"), UploadId: aws.String("upload-1")}); err != nil {
		t.Errorf("the upload the hook renamed the answer of: %v", err)
	}
}

// Wrap puts the same hooks around another client's calls, and lets the
// calls without one through.
func TestWrap(t *testing.T) {
	ctx := context.Background()
	inner := &s3fake.Client{}
	inner.Put("k", s3.HeadObjectOutput{ETag: aws.String(`"e"`)})
	heads := 0
	w := s3fake.Wrap(inner, s3fake.Hooks{HeadObject: func(ctx context.Context, in *s3.HeadObjectInput, next s3fake.Next[s3.HeadObjectInput, s3.HeadObjectOutput]) (*s3.HeadObjectOutput, error) {
		heads++
		return next(ctx, in)
	}})
	if head, err := w.HeadObject(ctx, &s3.HeadObjectInput{Key: aws.String("k")}); err != nil || aws.ToString(head.ETag) != `"e"` || heads != 1 {
		t.Errorf("head through the hook: %v %v, %d calls", head, err, heads)
	}
	if _, err := w.DeleteObject(ctx, &s3.DeleteObjectInput{Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	var notFound *types.NotFound
	if _, err := w.HeadObject(ctx, &s3.HeadObjectInput{Key: aws.String("k")}); !errors.As(err, &notFound) || heads != 2 {
		t.Errorf("head after the delete let through: %v, %d calls", err, heads)
	}
}
