package upload

import "github.com/aws/aws-sdk-go-v2/service/s3"

// StateAborting is the record state of an abort that has begun, for the
// tests that set up an abort stopped half-way.
const StateAborting = stateAborting

// NewPresignerWith is NewPresigner with options for its presign client,
// for the tests that sign with a presigner of their own.
func NewPresignerWith(client *s3.Client, bucket string, optFns ...func(*s3.PresignOptions)) *S3Presigner {
	return &S3Presigner{client: s3.NewPresignClient(client, optFns...), bucket: bucket}
}
