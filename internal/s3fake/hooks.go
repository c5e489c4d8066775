package s3fake

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Next is the operation a Hook stands around: the bucket's own, or the
// wrapped client's.
type Next[In, Out any] = func(ctx context.Context, in *In) (*Out, error)

// Hook stands around one operation, for a test's fault: it may answer in
// its place (an error made with APIError, or an output), wait, count the
// calls, change the request or the answer, or act before or after next,
// the operation itself (a race: another request at work while S3 is).
type Hook[In, Out any] func(ctx context.Context, in *In, next Next[In, Out]) (*Out, error)

// Hooks has a Hook for each operation of API; a nil one lets the call
// through.
type Hooks struct {
	HeadObject              Hook[s3.HeadObjectInput, s3.HeadObjectOutput]
	DeleteObject            Hook[s3.DeleteObjectInput, s3.DeleteObjectOutput]
	CreateMultipartUpload   Hook[s3.CreateMultipartUploadInput, s3.CreateMultipartUploadOutput]
	ListParts               Hook[s3.ListPartsInput, s3.ListPartsOutput]
	CompleteMultipartUpload Hook[s3.CompleteMultipartUploadInput, s3.CompleteMultipartUploadOutput]
	AbortMultipartUpload    Hook[s3.AbortMultipartUploadInput, s3.AbortMultipartUploadOutput]
}
