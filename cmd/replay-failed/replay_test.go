package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/onceupload/onceupload/internal/sqsdrain"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// The finalize bootstrap is built once (testenv.Bootstraps) and removed at
// the end.
func TestMain(m *testing.M) { testenv.Main(m) }

// The whole replay, with real parts: an upload whose S3 event finalize
// never recorded sits in an SQS failure queue (moto's SQS) as Lambda's
// destination record; replay-failed invokes the real finalize bootstrap
// (under the Runtime Interface Emulator, which serves Lambda's Invoke
// API) and the record completes; the message is deleted, and a message
// that is not a destination record stays.
func TestReplayFailedEvents(t *testing.T) {
	testenv.RequireTools(t, "dynoxide", "versitygw", "aws-lambda-rie")
	ctx := context.Background()
	sqsURL := testenv.Moto(t)
	dynamoEndpoint, s3Endpoint := testenv.Dynoxide(t), testenv.Versity(t)
	ddb := testenv.DynamoClient(dynamoEndpoint, nil)
	s3c := testenv.S3Client(s3Endpoint, nil)
	table, bucket := testenv.NewTable(t, ddb), testenv.NewBucket(t, s3c)

	// An upload whose bytes S3 holds, and whose event was lost.
	store := dynamostore.New(ddb, table)
	svc := upload.New(store, upload.NewPresigner(s3c, bucket), s3c, upload.Config{Bucket: bucket, Prefix: "uploads/", PresignTTL: time.Minute, MaxUploadBytes: 1 << 20})
	content := []byte("an upload whose event failed")
	sum := sha256.Sum256(content)
	reply, err := svc.Create(ctx, "jwt:tenant", "replay-failed-key-1", api.CreateRequest{Filename: "a.txt", ContentType: "text/plain", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	var u api.Upload
	_ = json.Unmarshal(reply.Body, &u)
	if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
		t.Fatalf("PUT: %d %v", code, err)
	}
	head, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &u.StorageKey})
	if err != nil {
		t.Fatal(err)
	}

	// The failure queue holds Lambda's destination record of that event,
	// and something that is not one.
	q := sqs.NewFromConfig(testenv.AWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = &sqsURL })
	queue, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("finalize-failures")})
	if err != nil {
		t.Fatal(err)
	}
	event := fmt.Sprintf(`{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2026-11-30T12:00:00.000Z","eventName":"ObjectCreated:Put","s3":{"s3SchemaVersion":"1.0","bucket":{"name":%q,"arn":"arn:aws:s3:::%s"},"object":{"key":%q,"size":%d,"eTag":%q,"sequencer":"0"}}}]}`,
		bucket, bucket, url.QueryEscape(u.StorageKey), len(content), strings.Trim(aws.ToString(head.ETag), `"`))
	record := `{"version":"1.0","timestamp":"2026-11-30T12:05:00.000Z","requestContext":{"requestId":"r1","functionArn":"arn:aws:lambda:us-east-1:000000000000:function:finalize:$LATEST","condition":"RetriesExhausted","approximateInvokeCount":3},"requestPayload":` + event + `,"responseContext":{"statusCode":200,"executedVersion":"$LATEST","functionError":"Unhandled"}}`
	for _, body := range []string{record, "not a destination record"} {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: queue.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}

	// The emulator serves Lambda's Invoke API for the function "function".
	finalizeURL := testenv.StartFunction(t, "finalize", []string{
		"TABLE_NAME=" + table, "BUCKET_NAME=" + bucket,
		"AWS_ENDPOINT_URL_DYNAMODB=" + dynamoEndpoint, "AWS_ENDPOINT_URL_S3=" + s3Endpoint, "S3_FORCE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + testenv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + testenv.SecretKey, "AWS_REGION=" + testenv.Region,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	})
	fn := lambda.NewFromConfig(testenv.AWSConfig(), func(o *lambda.Options) { o.BaseEndpoint = &finalizeURL })
	var log bytes.Buffer
	r := &replayer{queue: &sqsdrain.Reader{Client: q, URL: aws.ToString(queue.QueueUrl), Visibility: visibility}, fn: fn, function: "function", log: &log}
	res, err := r.run(ctx, 100)
	if err != nil || res != (result{replayed: 1, unreadable: 1}) {
		t.Fatalf("run: %+v %v\n%s", res, err, log.String())
	}
	id, _ := upload.ParseUploadID(u.UploadID)
	rec, err := store.Get(ctx, id)
	if err != nil || rec.State != idempotency.StateCompleted {
		t.Fatalf("record after the replay: %+v %v", rec, err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes["ApproximateNumberOfMessages"] + "+" + attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]; n != "0+1" {
		t.Fatalf("queue after the replay (visible+in flight): %s, want only the unreadable message left", n)
	}
}
