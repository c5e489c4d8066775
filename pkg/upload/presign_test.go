package upload

import (
	"context"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/pkg/awslite"
)

// presignKeys are a plain key and one that needs every kind of escaping.
var presignKeys = []string{"uploads/0123abcd", "in/sub dir/a+b%c é.txt"}

// samePresigned fails t unless fast presigns a PUT and an UploadPart of
// key exactly as the SDK's presign client does for client, signed at the
// same time: URL, method and signed headers.
func samePresigned(t *testing.T, client *s3.Client, fast *SigV4Presigner, bucket, key string) {
	t.Helper()
	ctx := context.Background()
	// The SDK signs with its own clock; ours is set to the time it used.
	atSDKTime := func(signed string) {
		u, _ := url.Parse(signed)
		fast.now = func() time.Time {
			ts, _ := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
			return ts
		}
	}
	const sum = "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="
	in := &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), ContentType: aws.String("image/jpeg; q=1"),
		ContentLength: aws.Int64(48213), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256: aws.String(sum),
	}
	want, err := s3.NewPresignClient(client).PresignPutObject(ctx, in, s3.WithPresignExpires(15*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	atSDKTime(want.URL)
	got, err := fast.PresignPutObject(ctx, &PresignInput{
		Key: key, ContentType: "image/jpeg; q=1", ContentLength: 48213, ChecksumSHA256: sum, Expires: 15 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != want.URL || got.Method != want.Method || !reflect.DeepEqual(got.SignedHeader, want.SignedHeader) {
		t.Errorf("key %q:\n got %s %v\nwant %s %v", key, got.URL, got.SignedHeader, want.URL, want.SignedHeader)
	}

	const uploadID = "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA+/="
	part := &s3.UploadPartInput{
		Bucket: aws.String(bucket), Key: aws.String(key), PartNumber: aws.Int32(10000),
		UploadId: aws.String(uploadID), ContentLength: aws.Int64(5 << 20),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: aws.String(sum),
	}
	wantPart, err := s3.NewPresignClient(client).PresignUploadPart(ctx, part, s3.WithPresignExpires(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	atSDKTime(wantPart.URL)
	gotPart, err := fast.PresignUploadPart(ctx, &PresignInput{
		Key: key, UploadID: uploadID, PartNumber: 10000, ContentLength: 5 << 20, ChecksumSHA256: sum, Expires: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotPart.URL != wantPart.URL || !reflect.DeepEqual(gotPart.SignedHeader, wantPart.SignedHeader) {
		t.Errorf("part of key %q:\n got %s %v\nwant %s %v", key, gotPart.URL, gotPart.SignedHeader, wantPart.URL, wantPart.SignedHeader)
	}
}

// NewPresignerAt at awslite.S3's BucketEndpoint presigns exactly as the
// SDK's presign client does with the same settings, for AWS endpoints and
// local ones: URL, method and signed headers.
func TestPresignerAtBucketEndpointMatchesTheSDK(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("ASIA", "SECRET", "TOKEN/with+chars=")
	cases := []struct {
		name, region, endpoint, bucket string
		pathStyle                      bool
	}{
		{name: "aws, virtual-hosted", region: "eu-west-1", bucket: "my-bucket"},
		{name: "aws us-east-1", region: "us-east-1", bucket: "my-bucket"},
		{name: "aws, path style", region: "eu-west-1", bucket: "my-bucket", pathStyle: true},
		{name: "aws, a bucket with dots", region: "eu-west-1", bucket: "my.bucket.example"},
		{name: "aws, a bucket with capitals", region: "eu-west-1", bucket: "My_Bucket"},
		{name: "aws China", region: "cn-north-1", bucket: "my-bucket"},
		{name: "aws GovCloud", region: "us-gov-west-1", bucket: "my-bucket"},
		{name: "local, path style", region: "us-east-1", endpoint: "http://127.0.0.1:9000", bucket: "my-bucket", pathStyle: true},
		{name: "local IP, virtual-hosted asked", region: "us-east-1", endpoint: "http://127.0.0.1:9000", bucket: "my-bucket"},
		{name: "base endpoint, virtual-hosted", region: "us-east-1", endpoint: "http://localhost:9000/base/", bucket: "my-bucket"},
		{name: "base endpoint, a bucket with dots", region: "us-east-1", endpoint: "http://localhost:9000", bucket: "my.bucket"},
		{name: "base endpoint with a port and a path", region: "eu-west-1", endpoint: "https://s3.example.com:8443/base/path", bucket: "my-bucket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := aws.Config{Region: c.region, Credentials: creds}
			if c.endpoint != "" {
				cfg.BaseEndpoint = aws.String(c.endpoint)
			}
			sdk := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = c.pathStyle })
			lite, err := awslite.NewS3(cfg, func(o *awslite.Options) { o.UsePathStyle = c.pathStyle })
			if err != nil {
				t.Fatal(err)
			}
			fast := NewPresignerAt(lite.BucketEndpoint(c.bucket), c.region, creds)
			for _, key := range presignKeys {
				samePresigned(t, sdk, fast, c.bucket, key)
			}
		})
	}
}
