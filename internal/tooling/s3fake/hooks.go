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

// Wrap returns next with hooks standing around its calls: a test's faults
// on a real S3 server, as on the fake.
func Wrap(next API, hooks Hooks) API { return &wrapped{next: next, hooks: hooks} }

type wrapped struct {
	next  API
	hooks Hooks
}

func (w *wrapped) HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return through(ctx, w, w.hooks.HeadObject, in, API.HeadObject, optFns)
}

func (w *wrapped) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	return through(ctx, w, w.hooks.DeleteObject, in, API.DeleteObject, optFns)
}

func (w *wrapped) CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	return through(ctx, w, w.hooks.CreateMultipartUpload, in, API.CreateMultipartUpload, optFns)
}

func (w *wrapped) ListParts(ctx context.Context, in *s3.ListPartsInput, optFns ...func(*s3.Options)) (*s3.ListPartsOutput, error) {
	return through(ctx, w, w.hooks.ListParts, in, API.ListParts, optFns)
}

func (w *wrapped) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	return through(ctx, w, w.hooks.CompleteMultipartUpload, in, API.CompleteMultipartUpload, optFns)
}

func (w *wrapped) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	return through(ctx, w, w.hooks.AbortMultipartUpload, in, API.AbortMultipartUpload, optFns)
}

// through calls op on w's client with optFns, through h when there is one.
func through[In, Out any](ctx context.Context, w *wrapped, h Hook[In, Out], in *In,
	op func(API, context.Context, *In, ...func(*s3.Options)) (*Out, error), optFns []func(*s3.Options)) (*Out, error) {
	next := func(ctx context.Context, in *In) (*Out, error) { return op(w.next, ctx, in, optFns...) }
	if h == nil {
		return next(ctx, in)
	}
	return h(ctx, in, next)
}
