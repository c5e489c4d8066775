package services

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/onceupload/onceupload/pkg/api"
)

// The local servers' static credentials and region, the one definition that
// the local stack, the tests and the benchmarks share.
const (
	AccessKey = "local"
	SecretKey = "localsecret"
	Region    = "us-east-1"
)

// AWSConfig is an SDK configuration for the local servers: their static
// credentials and region, and no shared config files read.
func AWSConfig() aws.Config {
	return aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")}
}

// PutPresigned sends body to an upload's presigned URL with plain net/http
// and the headers the upload lists, changed by tweak (if not nil), as a
// client would, and returns S3's status code.
func PutPresigned(ctx context.Context, u api.Upload, body []byte, tweak func(*http.Request)) (int, error) {
	if u.Upload == nil {
		return 0, fmt.Errorf("upload %s has no PUT instructions (status %s)", u.UploadID, u.Status)
	}
	req, err := http.NewRequestWithContext(ctx, u.Upload.Method, u.Upload.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range u.Upload.Headers {
		req.Header.Set(k, v)
	}
	if tweak != nil {
		tweak(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
