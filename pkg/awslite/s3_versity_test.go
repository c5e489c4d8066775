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
)

// versityS3 is a Versity Gateway with a bucket, and the SDK's client and
// awslite's for it.
type versityS3 struct {
	sdk    *s3.Client
	lite   *awslite.S3
	bucket string
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
	return versityS3{sdk: sdk, lite: lite, bucket: testenv.NewBucket(t, sdk)}
}

// sameOutput fails t unless awslite's output equals the SDK's mapped to
// awslite's type, field by field.
func sameOutput(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// sameError fails t unless both errors are API errors with the same code,
// one of codes.
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

// isCode reports whether err is an *awslite.Error with code.
func isCode(err error, code string) bool {
	var e *awslite.Error
	return errors.As(err, &e) && e.Code == code
}

// uploadParts starts a multipart upload of key with awslite and sends
// parts of the given sizes with the SDK (awslite has no UploadPart), each
// with its SHA-256; it returns the upload id and the parts to complete
// with. Part n is n repeated, so that uploads of the same sizes make the
// same object.
func (v versityS3) uploadParts(t *testing.T, key string, sizes ...int) (string, []awslite.CompletedPart) {
	t.Helper()
	ctx := context.Background()
	created, err := v.lite.CreateMultipartUpload(ctx, &awslite.CreateMultipartUploadInput{
		Bucket: v.bucket, Key: key, ContentType: "video/mp4", ChecksumAlgorithm: awslite.ChecksumSHA256Algorithm,
	})
	if err != nil {
		t.Fatalf("create %q: %v", key, err)
	}
	if created.UploadID == "" {
		t.Fatalf("create: %+v", created)
	}
	var parts []awslite.CompletedPart
	for i, size := range sizes {
		n := int32(i + 1)
		out, err := v.sdk.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &v.bucket, Key: &key, UploadId: &created.UploadID, PartNumber: &n,
			Body: bytes.NewReader(bytes.Repeat([]byte{byte(n)}, size)), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		})
		if err != nil {
			t.Fatalf("part %d: %v", n, err)
		}
		parts = append(parts, awslite.CompletedPart{PartNumber: n, ETag: aws.ToString(out.ETag), ChecksumSHA256: aws.ToString(out.ChecksumSHA256)})
	}
	return created.UploadID, parts
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
				Bucket: &v.bucket, Key: &key, Body: bytes.NewReader([]byte("hello world")),
				ContentType: aws.String("image/png"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
				Metadata: map[string]string{"filename": "a b.png"},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []bool{true, false} {
				in := &awslite.HeadObjectInput{Bucket: v.bucket, Key: key, ChecksumMode: mode}
				got, err := v.lite.HeadObject(ctx, in)
				if err != nil {
					t.Fatalf("%q: %v", key, err)
				}
				want, err := v.sdk.HeadObject(ctx, sdkHeadInput(in))
				if err != nil {
					t.Fatal(err)
				}
				sameOutput(t, "head "+key, got, liteHeadOutput(want))
				if mode && (got.ChecksumSHA256 == "" || got.ContentLength != 11 || got.ETag == "" || got.LastModified.IsZero() ||
					got.Metadata["filename"] != "a b.png" || got.ContentType != "image/png") {
					t.Errorf("head %q: %+v", key, got)
				}
			}
		}
	})

	t.Run("HeadObject of a missing object", func(t *testing.T) {
		in := &awslite.HeadObjectInput{Bucket: v.bucket, Key: "no/such key"}
		_, err := v.lite.HeadObject(ctx, in)
		if !isCode(err, "NotFound") {
			t.Fatalf("err = %v, not NotFound", err)
		}
		_, sdkErr := v.sdk.HeadObject(ctx, sdkHeadInput(in))
		sameError(t, "head", err, sdkErr, "NotFound")
		var notFound *types.NotFound
		if !errors.As(sdkErr, &notFound) {
			t.Errorf("the SDK's error %v is not *types.NotFound", sdkErr)
		}
	})

	t.Run("multipart upload, complete and head", func(t *testing.T) {
		for _, key := range s3TestKeys {
			key = "multipart/" + key
			uploadID, parts := v.uploadParts(t, key, 5<<20, 1024)
			list := &awslite.ListPartsInput{Bucket: v.bucket, Key: key, UploadID: uploadID}
			got, err := v.lite.ListParts(ctx, list)
			if err != nil {
				t.Fatalf("list %q: %v", key, err)
			}
			want, err := v.sdk.ListParts(ctx, sdkListInput(list))
			if err != nil {
				t.Fatal(err)
			}
			sameOutput(t, "list parts", got, liteListOutput(want))
			if len(got.Parts) != 2 || got.Parts[1].ChecksumSHA256 != parts[1].ChecksumSHA256 ||
				got.Parts[0].Size != 5<<20 || got.Parts[0].LastModified.IsZero() || got.IsTruncated {
				t.Errorf("parts: %+v", got)
			}

			// One part a page, as the upload service pages.
			var marker string
			for page := 1; page <= 2; page++ {
				in := &awslite.ListPartsInput{Bucket: v.bucket, Key: key, UploadID: uploadID, MaxParts: 1, PartNumberMarker: marker}
				got, err := v.lite.ListParts(ctx, in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := v.sdk.ListParts(ctx, sdkListInput(in))
				if err != nil {
					t.Fatal(err)
				}
				sameOutput(t, "page", got, liteListOutput(want))
				if len(got.Parts) != 1 || got.Parts[0].PartNumber != int32(page) || got.IsTruncated != (page == 1) {
					t.Errorf("page %d: %+v", page, got)
				}
				marker = got.NextPartNumberMarker
			}
			// Paged to the end as the SDK's paginator pages, awslite lists
			// the parts the SDK's client lists in one page.
			var paged []awslite.Part
			for in := *list; ; {
				in.MaxParts = 1
				page, err := v.lite.ListParts(ctx, &in)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page.Parts...)
				if !page.IsTruncated || len(paged) > len(parts) {
					break
				}
				in.PartNumberMarker = page.NextPartNumberMarker
			}
			if w := liteParts(want.Parts); !reflect.DeepEqual(paged, w) {
				t.Errorf("paginated:\n got %+v\nwant %+v", paged, w)
			}

			// Completed by awslite here, by the SDK for a twin upload of the
			// same bytes: the same answer but for the location.
			completeInput := func(key, uploadID string, parts []awslite.CompletedPart) *awslite.CompleteMultipartUploadInput {
				return &awslite.CompleteMultipartUploadInput{
					Bucket: v.bucket, Key: key, UploadID: uploadID, Parts: parts,
					MpuObjectSize: 5<<20 + 1024, IfNoneMatch: "*",
				}
			}
			done, err := v.lite.CompleteMultipartUpload(ctx, completeInput(key, uploadID, parts))
			if err != nil {
				t.Fatalf("complete %q: %v", key, err)
			}
			if done.ETag == "" || done.ChecksumSHA256 == "" || done.ChecksumType == "" || done.Location == "" {
				t.Errorf("complete: %+v", done)
			}
			twinID, twinParts := v.uploadParts(t, key+" twin", 5<<20, 1024)
			sdkTwin, err := v.sdk.CompleteMultipartUpload(ctx, sdkCompleteInput(completeInput(key+" twin", twinID, twinParts)))
			if err != nil {
				t.Fatalf("complete %q twin: %v", key, err)
			}
			twin := liteCompleteOutput(sdkTwin)
			twin.Location = done.Location
			sameOutput(t, "complete", done, twin)

			head := &awslite.HeadObjectInput{Bucket: v.bucket, Key: key, ChecksumMode: true}
			gotHead, err := v.lite.HeadObject(ctx, head)
			if err != nil {
				t.Fatal(err)
			}
			wantHead, err := v.sdk.HeadObject(ctx, sdkHeadInput(head))
			if err != nil {
				t.Fatal(err)
			}
			sameOutput(t, "head of a multipart object", gotHead, liteHeadOutput(wantHead))
			if gotHead.ChecksumSHA256 != done.ChecksumSHA256 || gotHead.ETag != done.ETag ||
				gotHead.ContentLength != 5<<20+1024 || gotHead.ContentType != "video/mp4" {
				t.Errorf("head: %+v\ncomplete: %+v", gotHead, done)
			}
		}
	})

	t.Run("HeadObject with If-Match", func(t *testing.T) {
		key := "if-match/" + s3TestKeys[1]
		put, err := v.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: &v.bucket, Key: &key, Body: bytes.NewReader([]byte("x"))})
		if err != nil {
			t.Fatal(err)
		}
		in := &awslite.HeadObjectInput{Bucket: v.bucket, Key: key, IfMatch: aws.ToString(put.ETag)}
		got, err := v.lite.HeadObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := v.sdk.HeadObject(ctx, sdkHeadInput(in))
		if err != nil {
			t.Fatal(err)
		}
		sameOutput(t, "head with the right ETag", got, liteHeadOutput(want))

		in.IfMatch = `"00000000000000000000000000000000"`
		_, err = v.lite.HeadObject(ctx, in)
		_, sdkErr := v.sdk.HeadObject(ctx, sdkHeadInput(in))
		sameError(t, "head with a wrong ETag", err, sdkErr, "PreconditionFailed")
	})

	t.Run("Complete with If-None-Match * over an existing object", func(t *testing.T) {
		key := "exists/" + s3TestKeys[1]
		if _, err := v.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: &v.bucket, Key: &key, Body: bytes.NewReader([]byte("x"))}); err != nil {
			t.Fatal(err)
		}
		uploadID, parts := v.uploadParts(t, key, 1024)
		in := &awslite.CompleteMultipartUploadInput{
			Bucket: v.bucket, Key: key, UploadID: uploadID, Parts: parts,
			MpuObjectSize: 1024, IfNoneMatch: "*",
		}
		_, err := v.lite.CompleteMultipartUpload(ctx, in)
		_, sdkErr := v.sdk.CompleteMultipartUpload(ctx, sdkCompleteInput(in))
		sameError(t, "complete", err, sdkErr, "PreconditionFailed", "ConditionalRequestConflict")
		var e *awslite.Error
		if errors.As(err, &e); e == nil || (e.StatusCode != 412 && e.StatusCode != 409) {
			t.Errorf("err = %#v", e)
		}
	})

	t.Run("Complete with a wrong object size", func(t *testing.T) {
		key := "size/" + s3TestKeys[2]
		uploadID, parts := v.uploadParts(t, key, 1024)
		in := &awslite.CompleteMultipartUploadInput{Bucket: v.bucket, Key: key, UploadID: uploadID, Parts: parts, MpuObjectSize: 1023}
		_, err := v.lite.CompleteMultipartUpload(ctx, in)
		_, sdkErr := v.sdk.CompleteMultipartUpload(ctx, sdkCompleteInput(in))
		var g, w smithy.APIError
		if !errors.As(err, &g) || !errors.As(sdkErr, &w) || g.ErrorCode() != w.ErrorCode() {
			t.Errorf("awslite %v; SDK %v", err, sdkErr)
		}
	})

	t.Run("Abort, and an upload that is gone", func(t *testing.T) {
		key := "abort/" + s3TestKeys[1]
		uploadID, _ := v.uploadParts(t, key, 1024)
		abort := &awslite.AbortMultipartUploadInput{Bucket: v.bucket, Key: key, UploadID: uploadID}
		if err := v.lite.AbortMultipartUpload(ctx, abort); err != nil {
			t.Fatal(err)
		}

		err := v.lite.AbortMultipartUpload(ctx, abort)
		if !isCode(err, "NoSuchUpload") {
			t.Errorf("abort again: %v, not NoSuchUpload", err)
		}
		_, sdkErr := v.sdk.AbortMultipartUpload(ctx, sdkAbortInput(abort))
		sameError(t, "abort again", err, sdkErr, "NoSuchUpload")

		list := &awslite.ListPartsInput{Bucket: v.bucket, Key: key, UploadID: uploadID}
		_, err = v.lite.ListParts(ctx, list)
		_, sdkErr = v.sdk.ListParts(ctx, sdkListInput(list))
		sameError(t, "list parts of an aborted upload", err, sdkErr, "NoSuchUpload")

		complete := &awslite.CompleteMultipartUploadInput{Bucket: v.bucket, Key: key, UploadID: uploadID,
			Parts: []awslite.CompletedPart{{PartNumber: 1, ETag: `"x"`}}}
		_, err = v.lite.CompleteMultipartUpload(ctx, complete)
		_, sdkErr = v.sdk.CompleteMultipartUpload(ctx, sdkCompleteInput(complete))
		// S3 says NoSuchUpload; Versity looks for the parts first.
		sameError(t, "complete an aborted upload", err, sdkErr, "NoSuchUpload", "InvalidPart")
	})

	t.Run("DeleteObject with If-Match", func(t *testing.T) {
		for _, key := range s3TestKeys {
			key = "delete/" + key
			put, err := v.sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: &v.bucket, Key: &key, Body: bytes.NewReader([]byte("x"))})
			if err != nil {
				t.Fatal(err)
			}
			wrong := &awslite.DeleteObjectInput{Bucket: v.bucket, Key: key, IfMatch: `"00000000000000000000000000000000"`}
			err = v.lite.DeleteObject(ctx, wrong)
			_, sdkErr := v.sdk.DeleteObject(ctx, sdkDeleteInput(wrong))
			sameError(t, "delete with a wrong ETag", err, sdkErr, "PreconditionFailed")

			if err := v.lite.DeleteObject(ctx, &awslite.DeleteObjectInput{Bucket: v.bucket, Key: key, IfMatch: aws.ToString(put.ETag)}); err != nil {
				t.Fatalf("delete %q: %v", key, err)
			}
			// Gone for both clients; deleting it again is no error for either.
			gone := &awslite.DeleteObjectInput{Bucket: v.bucket, Key: key}
			if _, err := v.sdk.DeleteObject(ctx, sdkDeleteInput(gone)); err != nil {
				t.Fatal(err)
			}
			if err := v.lite.DeleteObject(ctx, gone); err != nil {
				t.Errorf("delete again: %v", err)
			}
			head := &awslite.HeadObjectInput{Bucket: v.bucket, Key: key}
			_, err = v.lite.HeadObject(ctx, head)
			if !isCode(err, "NotFound") {
				t.Errorf("head after delete: %v", err)
			}
			_, sdkErr = v.sdk.HeadObject(ctx, sdkHeadInput(head))
			sameError(t, "head after delete", err, sdkErr, "NotFound")
		}
	})
}
