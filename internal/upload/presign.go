package upload

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/pkg/api"
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

// putInstructions tells a client how to use a presigned PUT: every signed
// header but Host and Content-Length (HTTP clients set those), and when the
// URL stops working, read from the URL itself so it is the signer's.
func putInstructions(req *v4.PresignedHTTPRequest) (*api.PutInstructions, error) {
	expires, err := presignedExpiry(req.URL)
	if err != nil {
		return nil, err
	}
	headers := make(map[string]string, len(req.SignedHeader))
	for name, values := range req.SignedHeader {
		switch {
		case name == "Host" || name == "Content-Length" || len(values) == 0:
		case strings.HasPrefix(name, "X-Amz-"):
			headers[strings.ToLower(name)] = values[0]
		default:
			headers[name] = values[0]
		}
	}
	return &api.PutInstructions{Method: http.MethodPut, URL: req.URL, Headers: headers, ExpiresAt: expires.Format(timeFormat)}, nil
}

// presignedExpiry reads when a SigV4 presigned URL stops working from its
// own X-Amz-Date and X-Amz-Expires, so the reported time is the signer's.
// It scans the query rather than parsing it: this is on the hot path.
func presignedExpiry(rawURL string) (time.Time, error) {
	param := func(name string) string {
		_, query, _ := strings.Cut(rawURL, "?")
		for query != "" {
			var kv string
			kv, query, _ = strings.Cut(query, "&")
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
	signed, err := time.Parse("20060102T150405Z", param("X-Amz-Date"))
	if err != nil {
		return time.Time{}, fmt.Errorf("presigned URL date: %w", err)
	}
	secs, err := strconv.Atoi(param("X-Amz-Expires"))
	if err != nil {
		return time.Time{}, fmt.Errorf("presigned URL expiry: %w", err)
	}
	return signed.Add(time.Duration(secs) * time.Second).UTC(), nil
}

// urlLifetime is how long a URL signed now may last: PRESIGN_TTL, but never
// past the claim's expiry, so no URL outlives the record that knows it.
// SigV4 counts whole seconds, at least one.
func (s *Service) urlLifetime(claimExpires time.Time) time.Duration {
	left := claimExpires.Sub(s.store.Now()).Truncate(time.Second)
	return max(min(s.cfg.PresignTTL, left), time.Second)
}
