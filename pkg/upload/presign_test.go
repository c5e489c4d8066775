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
)

// The fast presigner must produce exactly the SDK's URL and headers for
// the same request and signing time, for AWS endpoints and local ones.
func TestSigV4PresignerMatchesTheSDK(t *testing.T) {
	ctx := context.Background()
	clients := map[string]*s3.Client{
		"aws virtual host":       s3.New(s3.Options{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}),
		"aws with session token": s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("ASIA", "SECRET", "TOKEN/with+chars=")}),
		"local path style": s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "localsecret", ""),
			BaseEndpoint: aws.String("http://127.0.0.1:9000"), UsePathStyle: true}),
	}
	for name, client := range clients {
		t.Run(name, func(t *testing.T) {
			fast, err := NewSigV4Presigner(ctx, client, "my-bucket")
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"uploads/0123abcd", "in/sub dir/a+b%c é.txt"} {
				in := &s3.PutObjectInput{
					Bucket: aws.String("my-bucket"), Key: aws.String(key), ContentType: aws.String("image/jpeg; q=1"),
					ContentLength: aws.Int64(48213), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
					ChecksumSHA256: aws.String("n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="),
				}
				want, err := s3.NewPresignClient(client).PresignPutObject(ctx, in, s3.WithPresignExpires(15*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				u, _ := url.Parse(want.URL)
				fast.now = func() time.Time {
					ts, _ := time.Parse("20060102T150405Z", u.Query().Get("X-Amz-Date"))
					return ts
				}
				got, err := fast.PresignPutObject(ctx, in, s3.WithPresignExpires(15*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				if got.URL != want.URL || got.Method != want.Method || !reflect.DeepEqual(got.SignedHeader, want.SignedHeader) {
					t.Errorf("key %q:\n got %s %v\nwant %s %v", key, got.URL, got.SignedHeader, want.URL, want.SignedHeader)
				}

				part := &s3.UploadPartInput{
					Bucket: aws.String("my-bucket"), Key: aws.String(key), PartNumber: aws.Int32(10000),
					UploadId:      aws.String("VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA+/="),
					ContentLength: aws.Int64(5 << 20), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
					ChecksumSHA256: aws.String("n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="),
				}
				wantPart, err := s3.NewPresignClient(client).PresignUploadPart(ctx, part, s3.WithPresignExpires(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				pu, _ := url.Parse(wantPart.URL)
				fast.now = func() time.Time {
					ts, _ := time.Parse("20060102T150405Z", pu.Query().Get("X-Amz-Date"))
					return ts
				}
				gotPart, err := fast.PresignUploadPart(ctx, part, s3.WithPresignExpires(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				if gotPart.URL != wantPart.URL || !reflect.DeepEqual(gotPart.SignedHeader, wantPart.SignedHeader) {
					t.Errorf("part of key %q:\n got %s %v\nwant %s %v", key, gotPart.URL, gotPart.SignedHeader, wantPart.URL, wantPart.SignedHeader)
				}
			}
		})
	}
}
