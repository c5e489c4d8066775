// Package functions_test runs the built bootstrap binaries, as Lambda
// would, under the Runtime Interface Emulator against real local DynamoDB
// and S3, fed with the sample events in events/.
package functions_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
)

func invoke(t *testing.T, endpoint string, event any, out any) {
	t.Helper()
	raw, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(endpoint, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" || bytes.Contains(body, []byte(`"errorMessage"`)) {
		t.Fatalf("invoke: %d %s", resp.StatusCode, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("invoke result %s: %v", body, err)
		}
	}
}

func sample[T any](t *testing.T, name string) T {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func TestBootstrapsUnderRIE(t *testing.T) {
	ctx := context.Background()
	dynamoEndpoint, s3Endpoint := testenv.Dynoxide(t), testenv.Versity(t)
	ddb := testenv.DynamoClient(dynamoEndpoint, nil)
	s3Client := testenv.S3Client(s3Endpoint, nil)
	table, bucket := testenv.NewTable(t, ddb), testenv.NewBucket(t, s3Client)
	env := []string{
		"TABLE_NAME=" + table, "BUCKET_NAME=" + bucket,
		"AWS_ENDPOINT_URL_DYNAMODB=" + dynamoEndpoint, "AWS_ENDPOINT_URL_S3=" + s3Endpoint, "S3_FORCE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + testenv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + testenv.SecretKey, "AWS_REGION=" + testenv.Region,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_LAMBDA_LOG_FORMAT=JSON",
	}
	presign := testenv.StartFunction(t, "api", env) + services.InvokePath
	finalize := testenv.StartFunction(t, "finalize", env) + services.InvokePath

	// Create, with the sample event carrying a real file's size and digest.
	content := []byte("bytes uploaded through the real bootstraps")
	sum := sha256.Sum256(content)
	create := sample[events.APIGatewayV2HTTPRequest](t, "presign-create.json")
	create.Body = fmt.Sprintf(`{"filename":"photo.jpg","contentType":"image/jpeg","size":%d,"sha256":"%s"}`, len(content), hex.EncodeToString(sum[:]))
	var first, replay events.APIGatewayV2HTTPResponse
	invoke(t, presign, create, &first)
	invoke(t, presign, create, &replay)
	if first.StatusCode != 201 || replay.StatusCode != 201 || replay.Body != first.Body || replay.Headers["Idempotent-Replay"] != "true" {
		t.Fatalf("create %d %s\nreplay %d %v %s", first.StatusCode, first.Body, replay.StatusCode, replay.Headers, replay.Body)
	}
	var u api.Upload
	if err := json.Unmarshal([]byte(first.Body), &u); err != nil {
		t.Fatal(err)
	}

	// PUT the bytes to the presigned URL.
	if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
		t.Fatalf("PUT: %d %v", code, err)
	}
	head, err := s3Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &u.StorageKey})
	if err != nil {
		t.Fatal(err)
	}

	// The S3 event as AWS shapes it, twice (at-least-once delivery).
	ev := sample[events.S3Event](t, "finalize-object-created.json")
	obj := &ev.Records[0].S3
	obj.Bucket.Name, obj.Bucket.Arn = bucket, "arn:aws:s3:::"+bucket
	obj.Object.Key = url.QueryEscape(u.StorageKey)
	obj.Object.Size = *head.ContentLength
	obj.Object.ETag = strings.Trim(*head.ETag, `"`)
	invoke(t, finalize, ev, nil)
	invoke(t, finalize, ev, nil)

	var done events.APIGatewayV2HTTPResponse
	invoke(t, presign, create, &done)
	var completed api.Upload
	if err := json.Unmarshal([]byte(done.Body), &completed); err != nil {
		t.Fatal(err)
	}
	if done.StatusCode != 201 || completed.Status != api.StatusCompleted || completed.ETag != obj.Object.ETag || completed.UploadID != u.UploadID {
		t.Fatalf("replay after finalize: %d %s", done.StatusCode, done.Body)
	}

	status := sample[events.APIGatewayV2HTTPRequest](t, "presign-status.json")
	status.PathParameters["uploadId"] = u.UploadID
	status.RawPath = "/uploads/" + u.UploadID
	status.RequestContext.Authorizer.JWT.Claims["sub"] = create.RequestContext.Authorizer.JWT.Claims["sub"]
	var got events.APIGatewayV2HTTPResponse
	invoke(t, presign, status, &got)
	if got.StatusCode != 200 || got.Body != done.Body {
		t.Fatalf("status %d %s, want 200 with the completed body", got.StatusCode, got.Body)
	}

	list, err := s3Client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("objects: %v, %v; want exactly 1", list, err)
	}
}
