package awslite_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/onceupload/onceupload/internal/testenv"
	"github.com/onceupload/onceupload/pkg/awslite"
	"github.com/onceupload/onceupload/pkg/upload"
)

// versityS3 is a Versity Gateway with a bucket, and the SDK's client and
// awslite's for it.
type versityS3 struct {
	sdk    *s3.Client
	lite   *awslite.S3
	bucket *string
}

func newVersity(t *testing.T) versityS3 {
	t.Helper()
	endpoint := testenv.Versity(t)
	sdk := testenv.S3Client(endpoint, nil)
	lite, err := awslite.NewS3(testenv.AWSConfig(), func(o *awslite.Options) {
		o.BaseEndpoint = endpoint
		o.UsePathStyle = true // Versity serves path style only
	})
	if err != nil {
		t.Fatal(err)
	}
	return versityS3{sdk: sdk, lite: lite, bucket: aws.String(testenv.NewBucket(t, sdk))}
}

// sameOutput fails t unless awslite's output equals the SDK's, field by
// field, but for what only the SDK fills (ResultMetadata).
func sameOutput(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := withoutMetadata(got), withoutMetadata(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

// sameError fails t unless both errors are API errors with code.
func sameError(t *testing.T, what string, got, want error, codes ...string) {
	t.Helper()
	var g, w smithy.APIError
	if !errors.As(got, &g) || !errors.As(want, &w) || g.ErrorCode() != w.ErrorCode() {
		t.Fatalf("%s: awslite %v; SDK %v", what, got, want)
	}
	for _, code := range codes {
		if g.ErrorCode() == code {
			return
		}
	}
	t.Errorf("%s: code %s, want one of %v", what, g.ErrorCode(), codes)
}

// uploadParts starts a multipart upload of key with awslite and sends
// parts of the given sizes with the SDK (awslite has no UploadPart), each
// with its SHA-256; it returns the upload id and the parts to complete
// with. Part n is n repeated, so that uploads of the same sizes make the
// same object.
func (v versityS3) uploadParts(t *testing.T, key string, sizes ...int) (string, []types.CompletedPart) {
	t.Helper()
	ctx := context.Background()
	created, err := v.lite.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: v.bucket, Key: &key, ContentType: aws.String("video/mp4"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		Metadata: map[string]string{"tenant": "t1"},
	})
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	if aws.ToString(created.Key) != key || aws.ToString(created.Bucket) != *v.bucket || created.UploadId == nil {
		t.Fatalf("create: %+v", created)
	}
	var parts []types.CompletedPart
	for i, size := range sizes {
		n := aws.Int32(int32(i + 1))
		out, err := v.sdk.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: v.bucket, Key: &key, UploadId: created.UploadId, PartNumber: n,
			Body: bytes.NewReader(bytes.Repeat([]byte{byte(*n)}, size)), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		})
		if err != nil {
			t.Fatalf("part %d: %v", *n, err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: n, ETag: out.ETag, ChecksumSHA256: out.ChecksumSHA256})
	}
	return *created.UploadId, parts
}

// s3TestKeys need every kind of escaping in a path: spaces, non-ASCII, "+",
// "%", "/" (kept), and characters a URL leaves alone.
var s3TestKeys = []string{
	"uploads/0123abcd",
	"in/sub dir/a+b%c é ü/x~y_z.txt",
	"50%+50% = 100%/plus+/ünï cödé",
}

// Against a real S3 server, every method answers as the SDK's client does
// for the same object or upload.
func TestS3AgainstVersity(t *testing.T) {
	v := newVersity(t)
	ctx := context.Background()

	t.Run("HeadObject of a single PUT with its SHA-256", func(t *testing.T) {
		for _, key := range s3TestKeys {
			_, err := v.sdk.PutObject(ctx, &s3.PutObjectInput{
				Bucket: v.bucket, Key: &key, Body: bytes.NewReader([]byte("hello world")),
				ContentType: aws.String("image/png"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
				Metadata: map[string]string{"filename": "a b.png"},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []types.ChecksumMode{types.ChecksumModeEnabled, ""} {
				in := &s3.HeadObjectInput{Bucket: v.bucket, Key: &key, ChecksumMode: mode}
				got, err := v.lite.HeadObject(ctx, in)
				if err != nil {
					t.Fatalf("%q: %v", key, err)
				}
				want, err := v.sdk.HeadObject(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				sameOutput(t, "head "+key, got, want)
				if mode == types.ChecksumModeEnabled && (got.ChecksumSHA256 == nil || aws.ToInt64(got.ContentLength) != 11 ||
					got.ETag == nil || got.LastModified == nil || got.Metadata["filename"] != "a b.png" || aws.ToString(got.ContentType) != "image/png") {
					t.Errorf("head %q: %+v", key, got)
				}
			}
		}
	})

	t.Run("HeadObject of a missing object", func(t *testing.T) {
		in := &s3.HeadObjectInput{Bucket: v.bucket, Key: aws.String("no/such key")}
		_, err := v.lite.HeadObject(ctx, in)
		var notFound *types.NotFound
		if !errors.As(err, &notFound) {
			t.Fatalf("err = %v, not *types.NotFound", err)
		}
		_, sdkErr := v.sdk.HeadObject(ctx, in)
		sameError(t, "head", err, sdkErr, "NotFound")
	})

	t.Run("multipart upload, complete and head", func(t *testing.T) {
		for _, key := range s3TestKeys {
			key = "multipart/" + key
			uploadID, parts := v.uploadParts(t, key, 5<<20, 1024)
			list := &s3.ListPartsInput{Bucket: v.bucket, Key: &key, UploadId: &uploadID}
			got, err := v.lite.ListParts(ctx, list)
			if err != nil {
				t.Fatalf("list %q: %v", key, err)
			}
			want, err := v.sdk.ListParts(ctx, list)
			if err != nil {
				t.Fatal(err)
			}
			sameOutput(t, "list parts", got, want)
			if len(got.Parts) != 2 || aws.ToString(got.Parts[1].ChecksumSHA256) != aws.ToString(parts[1].ChecksumSHA256) ||
				aws.ToInt64(got.Parts[0].Size) != 5<<20 || got.Parts[0].LastModified == nil || aws.ToBool(got.IsTruncated) {
				t.Errorf("parts: %+v", got)
			}

			// One part a page, as the upload service's paginator asks.
			var marker *string
			for page := 1; page <= 2; page++ {
				in := &s3.ListPartsInput{Bucket: v.bucket, Key: &key, UploadId: &uploadID, MaxParts: aws.Int32(1), PartNumberMarker: marker}
				got, err := v.lite.ListParts(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := v.sdk.ListParts(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				sameOutput(t, "page", got, want)
				if len(got.Parts) != 1 || aws.ToInt32(got.Parts[0].PartNumber) != int32(page) || aws.ToBool(got.IsTruncated) != (page == 1) {
					t.Errorf("page %d: %+v", page, got)
				}
				marker = got.NextPartNumberMarker
			}
			var paged []types.Part
			for p := s3.NewListPartsPaginator(v.lite, list, func(o *s3.ListPartsPaginatorOptions) { o.Limit = 1 }); p.HasMorePages(); {
				page, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page.Parts...)
			}
			if !reflect.DeepEqual(paged, want.Parts) {
				t.Errorf("paginated:\n got %+v\nwant %+v", paged, want.Parts)
			}

			// Completed by awslite here, by the SDK for a twin upload of the
			// same bytes: the same answer but for the key.
			complete := func(client upload.ObjectAPI, key, uploadID string, parts []types.CompletedPart) *s3.CompleteMultipartUploadOutput {
				t.Helper()
				done, err := client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
					Bucket: v.bucket, Key: &key, UploadId: &uploadID,
					MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
					MpuObjectSize:   aws.Int64(5<<20 + 1024), IfNoneMatch: aws.String("*"),
				})
				if err != nil {
					t.Fatalf("complete %q: %v", key, err)
				}
				return done
			}
			done := complete(v.lite, key, uploadID, parts)
			if aws.ToString(done.Key) != key || done.ETag == nil || done.ChecksumSHA256 == nil || done.ChecksumType == "" {
				t.Errorf("complete: %+v", done)
			}
			twinID, twinParts := v.uploadParts(t, key+" twin", 5<<20, 1024)
			twin := complete(v.sdk, key+" twin", twinID, twinParts)
			twin.Key, twin.Location = done.Key, done.Location
			sameOutput(t, "complete", done, twin)

			head := &s3.HeadObjectInput{Bucket: v.bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled}
			gotHead, err := v.lite.HeadObject(ctx, head)
			if err != nil {
				t.Fatal(err)
			}
			wantHead, err := v.sdk.HeadObject(ctx, head)
			if err != nil {
				t.Fatal(err)
			}
			sameOutput(t, "head of a multipart object", gotHead, wantHead)
			if aws.ToString(gotHead.ChecksumSHA256) != aws.ToString(done.ChecksumSHA256) || aws.ToString(gotHead.ETag) != aws.ToString(done.ETag) ||
				aws.ToInt64(gotHead.ContentLength) != 5<<20+1024 || aws.ToString(gotHead.ContentType) != "video/mp4" || gotHead.Metadata["tenant"] != "t1" {
				t.Errorf("head: %+v\ncomplete: %+v", gotHead, done)
			}
		}
	})

	t.Run("Complete with If-None-Match * over an existing object", func(t *testing.T) {
		key := "exists/" + s3TestKeys[1]
		if _, err := v.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: v.bucket, Key: &key, Body: bytes.NewReader([]byte("x"))}); err != nil {
			t.Fatal(err)
		}
		uploadID, parts := v.uploadParts(t, key, 1024)
		in := &s3.CompleteMultipartUploadInput{
			Bucket: v.bucket, Key: &key, UploadId: &uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
			MpuObjectSize:   aws.Int64(1024), IfNoneMatch: aws.String("*"),
		}
		_, err := v.lite.CompleteMultipartUpload(ctx, in)
		_, sdkErr := v.sdk.CompleteMultipartUpload(ctx, in)
		sameError(t, "complete", err, sdkErr, "PreconditionFailed", "ConditionalRequestConflict")
		var e *awslite.Error
		if errors.As(err, &e); e == nil || (e.StatusCode != 412 && e.StatusCode != 409) {
			t.Errorf("err = %#v", e)
		}
	})

	t.Run("Complete with a wrong object size", func(t *testing.T) {
		uploadID, parts := v.uploadParts(t, "size/"+s3TestKeys[2], 1024)
		in := &s3.CompleteMultipartUploadInput{
			Bucket: v.bucket, Key: aws.String("size/" + s3TestKeys[2]), UploadId: &uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, MpuObjectSize: aws.Int64(1023),
		}
		_, err := v.lite.CompleteMultipartUpload(ctx, in)
		_, sdkErr := v.sdk.CompleteMultipartUpload(ctx, in)
		var g, w smithy.APIError
		if !errors.As(err, &g) || !errors.As(sdkErr, &w) || g.ErrorCode() != w.ErrorCode() {
			t.Errorf("awslite %v; SDK %v", err, sdkErr)
		}
	})

	t.Run("Abort, and an upload that is gone", func(t *testing.T) {
		key := "abort/" + s3TestKeys[1]
		uploadID, _ := v.uploadParts(t, key, 1024)
		abort := &s3.AbortMultipartUploadInput{Bucket: v.bucket, Key: &key, UploadId: &uploadID}
		got, err := v.lite.AbortMultipartUpload(ctx, abort)
		if err != nil {
			t.Fatal(err)
		}
		sameOutput(t, "abort", got, &s3.AbortMultipartUploadOutput{})

		_, err = v.lite.AbortMultipartUpload(ctx, abort)
		var nsu *types.NoSuchUpload
		if !errors.As(err, &nsu) {
			t.Errorf("abort again: %v, not *types.NoSuchUpload", err)
		}
		_, sdkErr := v.sdk.AbortMultipartUpload(ctx, abort)
		sameError(t, "abort again", err, sdkErr, "NoSuchUpload")

		list := &s3.ListPartsInput{Bucket: v.bucket, Key: &key, UploadId: &uploadID}
		_, err = v.lite.ListParts(ctx, list)
		_, sdkErr = v.sdk.ListParts(ctx, list)
		sameError(t, "list parts of an aborted upload", err, sdkErr, "NoSuchUpload")

		complete := &s3.CompleteMultipartUploadInput{Bucket: v.bucket, Key: &key, UploadId: &uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"x"`)}}}}
		_, err = v.lite.CompleteMultipartUpload(ctx, complete)
		_, sdkErr = v.sdk.CompleteMultipartUpload(ctx, complete)
		// S3 says NoSuchUpload; Versity looks for the parts first.
		sameError(t, "complete an aborted upload", err, sdkErr, "NoSuchUpload", "InvalidPart")
	})

	t.Run("DeleteObject with If-Match", func(t *testing.T) {
		for _, key := range s3TestKeys {
			key = "delete/" + key
			put, err := v.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: v.bucket, Key: &key, Body: bytes.NewReader([]byte("x"))})
			if err != nil {
				t.Fatal(err)
			}
			wrong := &s3.DeleteObjectInput{Bucket: v.bucket, Key: &key, IfMatch: aws.String(`"00000000000000000000000000000000"`)}
			_, err = v.lite.DeleteObject(ctx, wrong)
			_, sdkErr := v.sdk.DeleteObject(ctx, wrong)
			sameError(t, "delete with a wrong ETag", err, sdkErr, "PreconditionFailed")

			in := &s3.DeleteObjectInput{Bucket: v.bucket, Key: &key, IfMatch: put.ETag}
			got, err := v.lite.DeleteObject(ctx, in)
			if err != nil {
				t.Fatalf("delete %q: %v", key, err)
			}
			want, err := v.sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: v.bucket, Key: &key})
			if err != nil {
				t.Fatal(err)
			}
			sameOutput(t, "delete", got, want)
			_, err = v.lite.HeadObject(ctx, &s3.HeadObjectInput{Bucket: v.bucket, Key: &key})
			var notFound *types.NotFound
			if !errors.As(err, &notFound) {
				t.Errorf("head after delete: %v", err)
			}
		}
	})
}
