package upload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PresignInput is a PUT to presign: an object (PresignPutObject) or a part
// of a multipart upload (PresignUploadPart, with UploadID and PartNumber).
// The headers it names are signed, so S3 refuses any other bytes.
type PresignInput struct {
	Key           string
	ContentType   string // PutObject only
	ContentLength int64
	// ChecksumSHA256 is the body's SHA-256, base64; S3 checks it.
	ChecksumSHA256 string
	UploadID       string
	PartNumber     int32
	// Expires is the URL's lifetime, in whole seconds.
	Expires time.Duration
}

// S3Presigner presigns PUTs with the SDK's S3 presign client, so a URL is
// addressed as the client addresses the bucket: its region, endpoint
// (AWS_ENDPOINT_URL_S3), path style, FIPS and dual-stack settings. That
// costs more CPU per URL than signing a fixed endpoint by hand (make bench
// reports it); being wrong about an endpoint would cost more.
type S3Presigner struct {
	client *s3.PresignClient
	bucket string
}

var _ Presigner = (*S3Presigner)(nil)

// NewPresigner presigns PUTs into bucket with client.
func NewPresigner(client *s3.Client, bucket string) *S3Presigner {
	return &S3Presigner{client: s3.NewPresignClient(client), bucket: bucket}
}

// PresignPutObject presigns the PUT of an object, with If-None-Match: *
// signed, so the URL only ever creates the object.
func (p *S3Presigner) PresignPutObject(ctx context.Context, in *PresignInput) (*v4.PresignedHTTPRequest, error) {
	if in.Key == "" || in.Expires <= 0 {
		return nil, errors.New("presign: a key and an expiry are required")
	}
	put := &s3.PutObjectInput{
		Bucket: aws.String(p.bucket), Key: aws.String(in.Key), ContentLength: aws.Int64(in.ContentLength),
		// A URL never overwrites: signed, If-None-Match makes S3 refuse
		// (412) a PUT once the key holds an object, so a second PUT
		// through the URL cannot change what was stored, nor announce it
		// again.
		IfNoneMatch: aws.String("*"),
	}
	if in.ContentType != "" {
		put.ContentType = aws.String(in.ContentType)
	}
	if in.ChecksumSHA256 != "" {
		put.ChecksumAlgorithm, put.ChecksumSHA256 = types.ChecksumAlgorithmSha256, aws.String(in.ChecksumSHA256)
	}
	req, err := p.client.PresignPutObject(ctx, put, s3.WithPresignExpires(in.Expires))
	if err != nil {
		return nil, fmt.Errorf("presign: %w", err)
	}
	return req, nil
}

// PresignUploadPart presigns the PUT of a part.
func (p *S3Presigner) PresignUploadPart(ctx context.Context, in *PresignInput) (*v4.PresignedHTTPRequest, error) {
	if in.Key == "" || in.Expires <= 0 {
		return nil, errors.New("presign: a key and an expiry are required")
	}
	if in.PartNumber <= 0 || in.UploadID == "" {
		return nil, errors.New("presign: a part number and an upload id are required")
	}
	part := &s3.UploadPartInput{
		Bucket: aws.String(p.bucket), Key: aws.String(in.Key), UploadId: aws.String(in.UploadID),
		PartNumber: aws.Int32(in.PartNumber), ContentLength: aws.Int64(in.ContentLength),
	}
	if in.ChecksumSHA256 != "" {
		part.ChecksumAlgorithm, part.ChecksumSHA256 = types.ChecksumAlgorithmSha256, aws.String(in.ChecksumSHA256)
	}
	req, err := p.client.PresignUploadPart(ctx, part, s3.WithPresignExpires(in.Expires))
	if err != nil {
		return nil, fmt.Errorf("presign: %w", err)
	}
	return req, nil
}
