package services

import (
	"bytes"
	"context"
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

// PutSigned sends body as a presigned PUT describes, with the headers it
// lists, changed by tweak (if not nil), as a client would, and returns S3's
// status code.
func PutSigned(ctx context.Context, put api.PutInstructions, body []byte, tweak func(*http.Request)) (int, error) {
	req, err := http.NewRequestWithContext(ctx, put.Method, put.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range put.Headers {
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
