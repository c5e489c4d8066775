package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/onceupload/onceupload/internal/handlers/events"
	"github.com/onceupload/onceupload/internal/sqsdrain"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

var (
	dynoxide = testenv.SharedDynoxide()
	versity  = testenv.SharedVersity()
)

func TestMain(m *testing.M) { testenv.Main(m, dynoxide, versity) }

const tenant = "jwt:tenant"

// fixture is a table of genuine upload records (written by upload.Service
// on dynoxide, with their objects on Versity Gateway), and moto's SQS and
// EventBridge: a failure queue, and a bus whose rule sends every event of
// source "onceupload" to a queue the test reads.
type fixture struct {
	*testenv.Clock
	base                         time.Time
	dynamoURL, motoURL           string
	table, bucket, bus           string
	svc                          *upload.Service
	s3                           *s3.Client
	queues                       *sqs.Client
	events                       *eventbridge.Client
	failures, delivered          string // the queues' URLs
	scans                        testenv.Counter
	completed1, completed2, late api.EventDetail
	aborted                      api.EventDetail
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testenv.RequireTools(t, "dynoxide", "versitygw")
	ctx := context.Background()
	f := &fixture{base: time.Now().UTC().Truncate(time.Second)}
	f.Clock = testenv.NewClock(f.base)
	f.motoURL, f.dynamoURL = testenv.Moto(t), dynoxide.Endpoint(t)
	ddb := testenv.DynamoClient(f.dynamoURL, nil)
	f.s3 = testenv.S3Client(versity.Endpoint(t), nil)
	f.table, f.bucket = testenv.NewTable(t, ddb), testenv.NewBucket(t, f.s3)
	store := dynamostore.New(ddb, f.table, func(o *idempotency.Options) { o.Now = f.Now })
	f.svc = upload.New(store, upload.NewPresigner(f.s3, f.bucket), f.s3,
		upload.Config{Bucket: f.bucket, Prefix: "uploads/", PresignTTL: time.Minute, MaxUploadBytes: 64 << 20},
		func(o *upload.Options) {
			o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		})

	// The uploads: two completed and one aborted a few seconds apart, one
	// still pending, and, two hours later, one more completed.
	f.completed1 = f.complete(t, "key-1", "a.txt")
	f.Advance(2 * time.Second)
	f.completed2 = f.complete(t, "key-2", "b.txt")
	f.Advance(2 * time.Second)
	f.aborted = f.abort(t, "key-3")
	f.Advance(time.Second)
	if _, err := f.svc.Create(ctx, tenant, "key-4", api.CreateRequest{Filename: "d.txt", ContentType: "text/plain", Size: 5, SHA256: strings.Repeat("0", 64)}); err != nil {
		t.Fatal(err)
	}
	f.Advance(2 * time.Hour)
	f.late = f.complete(t, "key-5", "e.txt")

	// moto: the failure queue, and the bus with its rule and target queue.
	f.queues = sqs.NewFromConfig(testenv.AWSConfig(), func(o *sqs.Options) { o.BaseEndpoint = &f.motoURL })
	f.events = eventbridge.NewFromConfig(testenv.AWSConfig(), func(o *eventbridge.Options) { o.BaseEndpoint = &f.motoURL })
	f.failures = f.queue(t, "events-failures")
	f.delivered = f.queue(t, "delivered")
	arn, err := f.queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &f.delivered, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	f.bus = "uploads"
	if _, err := f.events.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: &f.bus}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.events.PutRule(ctx, &eventbridge.PutRuleInput{
		Name: aws.String("upload-events"), EventBusName: &f.bus, EventPattern: aws.String(`{"source":["onceupload"]}`),
	}); err != nil {
		t.Fatal(err)
	}
	targets, err := f.events.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: aws.String("upload-events"), EventBusName: &f.bus,
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(arn.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}},
	})
	if err != nil || targets.FailedEntryCount != 0 {
		t.Fatalf("put targets: %v %+v", err, targets)
	}
	return f
}

// complete creates a single-PUT upload, sends its bytes, and records it
// completed now, as finalize does on S3's event.
func (f *fixture) complete(t *testing.T, key, filename string) api.EventDetail {
	t.Helper()
	return f.completeAt(t, key, filename, f.Now())
}

// completeAt is complete with an S3 event that says the object was stored
// at stored: the record is written now, its completion time is stored.
func (f *fixture) completeAt(t *testing.T, key, filename string, stored time.Time) api.EventDetail {
	t.Helper()
	ctx := context.Background()
	content := []byte("the bytes of " + filename)
	sum := sha256.Sum256(content)
	reply, err := f.svc.Create(ctx, tenant, key, api.CreateRequest{Filename: filename, ContentType: "text/plain", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	var u api.Upload
	if err := json.Unmarshal(reply.Body, &u); err != nil {
		t.Fatal(err)
	}
	if code, err := testenv.PutPresigned(u, content, nil); err != nil || code != 200 {
		t.Fatalf("PUT: %d %v", code, err)
	}
	out, err := f.svc.Finalize(ctx, upload.ObjectCreated{Bucket: f.bucket, Key: u.StorageKey, Size: int64(len(content)), Time: stored})
	if err != nil || out != upload.OutcomeCompleted {
		t.Fatalf("finalize: %s %v", out, err)
	}
	d := f.detail(t, u.UploadID)
	if d.Status != api.StatusCompleted || d.CompletedAt != stored.UTC().Format(timeFormat) || d.ETag == "" {
		t.Fatalf("completed upload: %+v", d)
	}
	return d
}

// abort creates a multipart upload and aborts it now.
func (f *fixture) abort(t *testing.T, key string) api.EventDetail {
	t.Helper()
	ctx := context.Background()
	reply, err := f.svc.Create(ctx, tenant, key, api.CreateRequest{Filename: "c.bin", ContentType: "application/octet-stream", Size: 6 << 20, PartSize: api.MinPartSize})
	if err != nil {
		t.Fatal(err)
	}
	var u api.Upload
	if err := json.Unmarshal(reply.Body, &u); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Abort(ctx, tenant, u.UploadID); err != nil {
		t.Fatal(err)
	}
	d := f.detail(t, u.UploadID)
	d.AbortedAt = f.Now().UTC().Format(timeFormat)
	if d.Status != api.StatusAborted || d.PartCount != 2 {
		t.Fatalf("aborted upload: %+v", d)
	}
	return d
}

// detail is the event detail an upload's final body calls for, read
// through the service's status (a path apart from the events').
func (f *fixture) detail(t *testing.T, uploadID string) api.EventDetail {
	t.Helper()
	res, err := f.svc.Status(context.Background(), tenant, uploadID)
	if err != nil {
		t.Fatal(err)
	}
	var u api.Upload
	if err := json.Unmarshal(res.Body, &u); err != nil {
		t.Fatal(err)
	}
	d := api.EventDetail{
		UploadID: u.UploadID, Status: u.Status, Tenant: tenant, Bucket: f.bucket, StorageKey: u.StorageKey,
		Filename: u.Filename, ContentType: u.ContentType, Bytes: u.Bytes, SHA256: u.SHA256,
		CompositeSHA256: u.CompositeSHA256, ETag: u.ETag, CompletedAt: u.CompletedAt,
	}
	if u.Multipart != nil {
		d.PartSize, d.PartCount = u.Multipart.PartSize, u.Multipart.PartCount
	}
	return d
}

func (f *fixture) queue(t *testing.T, name string) string {
	t.Helper()
	q, err := f.queues.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name + "-" + rand.Text()[:8])})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.QueueUrl)
}

func (f *fixture) send(t *testing.T, queueURL string, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		if _, err := f.queues.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
}

// failure is Lambda's on-failure record of a batch of f's table's stream
// whose records arrived from first to last (the shape of the Lambda
// developer guide's example: arrival times to the second).
func (f *fixture) failure(first, last time.Time, size int) string {
	return failureOf(f.table, first, last, size)
}

func failureOf(table string, first, last time.Time, size int) string {
	return fmt.Sprintf(`{"requestContext":{"requestId":"316aa6d0-8154-4a4b-9af7-85d5f4a6bc81","functionArn":"arn:aws:lambda:us-east-1:000000000000:function:events","condition":"RetryAttemptsExhausted","approximateInvokeCount":51},`+
		`"responseContext":{"statusCode":200,"executedVersion":"$LATEST","functionError":"Unhandled"},"version":"1.0","timestamp":%q,`+
		`"DDBStreamBatchInfo":{"shardId":"shardId-00000001573689847184-864758bb","startSequenceNumber":"800000000003126276362","endSequenceNumber":"800000000003126276370",`+
		`"approximateArrivalOfFirstRecord":%q,"approximateArrivalOfLastRecord":%q,"batchSize":%d,"streamArn":"arn:aws:dynamodb:us-east-1:000000000000:table/%s/stream/2026-12-01T00:00:00.000"}}`,
		last.Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"), first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339), size, table)
}

// replayer replays f's failure queue, scanning the table with a client
// that counts its calls.
func (f *fixture) replayer(queueURL string, log io.Writer, bridge events.EventBridgeAPI) *replayer {
	f.scans.Reset()
	return &replayer{
		queue: &sqsdrain.Reader{Client: f.queues, URL: queueURL, Visibility: visibility}, table: testenv.DynamoClient(f.dynamoURL, &f.scans),
		publisher: &events.Handler{
			Events: bridge, Bus: f.bus, Source: api.EventSource, Bucket: f.bucket,
			Schema: idempotency.DefaultSchema(), Logger: slog.New(slog.NewTextHandler(log, nil)),
		},
		tableName: f.table, bucket: f.bucket, schema: idempotency.DefaultSchema(),
		slack: time.Minute, ttl: idempotency.DefaultTTL, now: f.Now, log: log,
	}
}

// event is an EventBridge event as the rule's target queue receives it.
type event struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Detail     api.EventDetail `json:"detail"`
}

// published reads every event the bus delivered, by upload id.
func (f *fixture) published(t *testing.T) map[string]event {
	t.Helper()
	got := map[string]event{}
	for {
		out, err := f.queues.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &f.delivered, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			var e event
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
				t.Fatalf("delivered event %s: %v", aws.ToString(m.Body), err)
			}
			if _, dup := got[e.Detail.UploadID]; dup {
				t.Errorf("upload %s: published twice", e.Detail.UploadID)
			}
			got[e.Detail.UploadID] = e
		}
	}
}

// left is what a queue holds: visible and in flight.
func (f *fixture) left(t *testing.T, queueURL string) string {
	t.Helper()
	attrs, err := f.queues.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &queueURL,
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		t.Fatal(err)
	}
	return attrs.Attributes["ApproximateNumberOfMessages"] + "+" + attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

func want(e api.EventDetail) event {
	dt := api.DetailTypeUploadCompleted
	if e.Status == api.StatusAborted {
		dt = api.DetailTypeUploadAborted
	}
	return event{Source: api.EventSource, DetailType: dt, Detail: e}
}

// Two failure messages whose windows overlap cover two completed uploads
// and an aborted one: one scan, three events on the bus with the right
// detail-types and details, both messages deleted. The upload completed
// two hours later and the pending one are not published; a message that
// is not an on-failure record of the table's stream stays; a message whose window
// is older than the table's TTL is counted and, nothing of it left to
// find, deleted.
func TestReplayEvents(t *testing.T) {
	f := newFixture(t)
	f.send(t, f.failures,
		f.failure(f.base, f.base.Add(2*time.Second), 2),
		f.failure(f.base.Add(4*time.Second), f.base.Add(4*time.Second), 1),
		"not an on-failure record",
		// An asynchronous invocation's record, as the finalize function's
		// failure queue holds: not a stream batch.
		`{"version":"1.0","requestContext":{"condition":"RetriesExhausted","approximateInvokeCount":3},"requestPayload":{"Records":[]}}`,
		f.failure(f.base.Add(-30*time.Hour), f.base.Add(-30*time.Hour), 1),
		// Another table's stream.
		failureOf("another-table", f.base, f.base, 1),
	)
	var log bytes.Buffer
	r := f.replayer(f.failures, &log, f.events)
	res, err := r.run(context.Background(), 100)
	if err != nil || res != (result{replayed: 3, events: 3, unreadable: 3, old: 1}) {
		t.Fatalf("run: %+v %v\n%s", res, err, log.String())
	}
	if n := f.scans.Ops()["Scan"]; n != 2 {
		t.Errorf("%d scans; want 2, one for the overlapping windows and one for the old one\n%s", n, log.String())
	}
	got := f.published(t)
	wanted := map[string]event{}
	for _, d := range []api.EventDetail{f.completed1, f.completed2, f.aborted} {
		wanted[d.UploadID] = want(d)
	}
	if !maps.Equal(got, wanted) {
		t.Fatalf("published:\n%+v\nwant\n%+v\n%s", got, wanted, log.String())
	}
	if n := f.left(t, f.failures); n != "3+0" {
		t.Fatalf("failure queue after the replay (visible+in flight): %s, want the three unreadable messages left, visible", n)
	}
}

// An upload belongs to a window by its completion time as well as by its
// record's write: finalize records the time S3 stored the object, which a
// late S3 event (replayed from finalize's own failure queue) brings hours
// after. With no slack, a window of one second holds the uploads written
// in it and the one S3 stored in it, and no other.
func TestReplayEventsByCompletionTime(t *testing.T) {
	f := newFixture(t)
	recordedLate := f.completeAt(t, "key-6", "f.txt", f.base.Add(3*time.Second))
	f.send(t, f.failures, f.failure(f.base.Add(3*time.Second), f.base.Add(3*time.Second), 1))
	var log bytes.Buffer
	r := f.replayer(f.failures, &log, f.events)
	r.slack = 0
	res, err := r.run(context.Background(), 100)
	if err != nil || res != (result{replayed: 1, events: 3}) {
		t.Fatalf("run: %+v %v\n%s", res, err, log.String())
	}
	got := f.published(t)
	wanted := map[string]event{}
	for _, d := range []api.EventDetail{f.completed2, f.aborted, recordedLate} {
		wanted[d.UploadID] = want(d)
	}
	if !maps.Equal(got, wanted) {
		t.Fatalf("published:\n%+v\nwant\n%+v\n%s", got, wanted, log.String())
	}
}

// A dry run, through the command's flags and the AWS environment, prints
// the events it would publish and the messages it would delete, and
// changes nothing.
func TestReplayEventsDryRun(t *testing.T) {
	f := newFixture(t)
	f.send(t, f.failures, f.failure(f.base, f.base.Add(4*time.Second), 3))
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": f.dynamoURL, "AWS_ENDPOINT_URL_SQS": f.motoURL, "AWS_ENDPOINT_URL_EVENTBRIDGE": f.motoURL,
		"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey, "AWS_REGION": testenv.Region,
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-queue-url", f.failures, "-table", f.table, "-bucket", f.bucket, "-bus", f.bus, "-slack", "1m", "-dry-run"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr.String())
	}
	for _, d := range []api.EventDetail{f.completed1, f.completed2, f.aborted} {
		detail, _ := json.Marshal(d)
		if line := fmt.Sprintf("would publish %s %s\n", want(d).DetailType, detail); !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
		// The entry PutEvents would be given, as events.Handler built it.
		if line := fmt.Sprintf("bus %s, source %s: would publish %s %s\n", f.bus, api.EventSource, want(d).DetailType, detail); !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
	if strings.Contains(out, f.late.UploadID) || !strings.Contains(out, "would delete message") ||
		!strings.Contains(out, "1 messages would be replayed (3 events), 0 failed") {
		t.Errorf("output:\n%s", out)
	}
	if got := f.published(t); len(got) != 0 {
		t.Fatalf("a dry run published %d events", len(got))
	}
	if n := f.left(t, f.failures); n != "1+0" {
		t.Fatalf("failure queue after a dry run (visible+in flight): %s, want its message, visible", n)
	}
}

// A completed item of a window that cannot be shaped into an event (here a
// copy of an upload's record that lost its object key) keeps the window's
// message in the queue, run after run; with -skip-unreadable it is named,
// dropped, and the rest of the window is published.
func TestReplayEventsSkipUnreadable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ddb := testenv.DynamoClient(f.dynamoURL, nil)
	out, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: &f.table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var bad map[string]types.AttributeValue
	for _, item := range out.Items {
		if id, ok := item["claim_id"].(*types.AttributeValueMemberS); ok && id.Value == f.completed1.UploadID {
			bad = maps.Clone(item)
		}
	}
	if bad == nil {
		t.Fatalf("no record of upload %s among %d items", f.completed1.UploadID, len(out.Items))
	}
	data := maps.Clone(bad["data"].(*types.AttributeValueMemberM).Value)
	delete(data, "object_key") // a former record's key
	delete(data, "key_prefix") // and a record's of now
	bad["data"] = &types.AttributeValueMemberM{Value: data}
	bad["pk"] = &types.AttributeValueMemberS{Value: "not-an-upload"}
	bad["claim_id"] = &types.AttributeValueMemberS{Value: "not-an-upload"}
	// Written first in the window: publishing stops before any event.
	bad["updated_at"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(f.base.Add(-30*time.Second).UnixMilli(), 10)}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &f.table, Item: bad}); err != nil {
		t.Fatal(err)
	}
	f.send(t, f.failures, f.failure(f.base, f.base.Add(4*time.Second), 3))

	for range 2 { // the same on every run
		var log bytes.Buffer
		res, err := f.replayer(f.failures, &log, f.events).run(ctx, 100)
		if err != nil || res.failed != 1 || res.replayed != 0 || res.skipped != 0 {
			t.Fatalf("run: %+v %v\n%s", res, err, log.String())
		}
		if !strings.Contains(log.String(), "left in the queue") {
			t.Errorf("the log does not say the message stays:\n%s", log.String())
		}
		if n := f.left(t, f.failures); n != "1+0" {
			t.Fatalf("failure queue (visible+in flight): %s, want the message, visible", n)
		}
	}
	if got := f.published(t); len(got) != 0 {
		t.Fatalf("published %+v; want nothing, the unreadable item first in its window", got)
	}

	var log bytes.Buffer
	r := f.replayer(f.failures, &log, f.events)
	r.skipUnreadable = true
	res, err := r.run(ctx, 100)
	if err != nil || res != (result{replayed: 1, events: 3, skipped: 1}) {
		t.Fatalf("run with -skip-unreadable: %+v %v\n%s", res, err, log.String())
	}
	if !strings.Contains(log.String(), `skipped item pk="not-an-upload", which cannot be made into an event`) {
		t.Errorf("the log does not name the skipped item:\n%s", log.String())
	}
	got := f.published(t)
	for _, d := range []api.EventDetail{f.completed1, f.completed2, f.aborted} {
		if got[d.UploadID] != want(d) {
			t.Errorf("upload %s: published %+v, want %+v", d.UploadID, got[d.UploadID], want(d))
		}
	}
	if n := f.left(t, f.failures); n != "0+0" {
		t.Fatalf("failure queue (visible+in flight): %s, want it empty", n)
	}
}

// refusing forwards PutEvents to moto with one upload's entry given an
// empty source, which EventBridge (moto) refuses for that entry alone.
type refusing struct {
	events.EventBridgeAPI
	uploadID string
}

func (r refusing) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	in.Entries = slices.Clone(in.Entries)
	for i, e := range in.Entries {
		if strings.Contains(aws.ToString(e.Detail), r.uploadID) {
			in.Entries[i].Source = aws.String("")
		}
	}
	return r.EventBridgeAPI.PutEvents(ctx, in, optFns...)
}

// An entry PutEvents refuses keeps its message in the queue; a message of
// another window, whose events were put, is deleted.
func TestReplayEventsPutFails(t *testing.T) {
	f := newFixture(t)
	f.send(t, f.failures,
		f.failure(f.base, f.base.Add(4*time.Second), 3),
		f.failure(f.base.Add(2*time.Hour+5*time.Second), f.base.Add(2*time.Hour+5*time.Second), 1),
	)
	var log bytes.Buffer
	r := f.replayer(f.failures, &log, refusing{EventBridgeAPI: f.events, uploadID: f.completed2.UploadID})
	res, err := r.run(context.Background(), 100)
	if err != nil || res != (result{replayed: 1, failed: 1, events: 2}) {
		t.Fatalf("run: %+v %v\n%s", res, err, log.String())
	}
	if !strings.Contains(log.String(), "InvalidArgument") {
		t.Errorf("the log does not show moto's refusal:\n%s", log.String())
	}
	got := f.published(t)
	if _, ok := got[f.completed2.UploadID]; ok || got[f.completed1.UploadID] != want(f.completed1) || got[f.late.UploadID] != want(f.late) {
		t.Fatalf("published: %+v", got)
	}
	if n := f.left(t, f.failures); n != "1+0" {
		t.Fatalf("failure queue (visible+in flight): %s, want the message whose event was refused, visible", n)
	}
}

// Missing or invalid flags are a usage error, before anything is read.
func TestReplayEventsFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-queue-url", "q", "-table", "t"},
		{"-queue-url", "q", "-table", "t", "-bucket", "b", "-source", "aws.s3"},
		{"-queue-url", "q", "-table", "t", "-bucket", "b", "-max", "0"},
		{"-queue-url", "q", "-table", "t", "-bucket", "b", "-slack", "-1s"},
		{"-no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and a message", args, code, stderr.String())
		}
	}
}

// eventsFunction answers GetFunctionConfiguration as Lambda does for the
// stack's events function.
type eventsFunction struct {
	name string
	env  map[string]string
}

func (e eventsFunction) GetFunctionConfiguration(_ context.Context, in *lambda.GetFunctionConfigurationInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error) {
	if aws.ToString(in.FunctionName) != e.name {
		return nil, fmt.Errorf("ResourceNotFoundException: Function not found: %s", aws.ToString(in.FunctionName))
	}
	return &lambda.GetFunctionConfigurationOutput{Environment: &lambdatypes.EnvironmentResponse{Variables: e.env}}, nil
}

// -function reads the table, bucket, bus and source from the events
// function's environment: the replayed events are the ones it would have
// put, with its source, not the default one.
func TestReplayEventsFromTheFunctionsSettings(t *testing.T) {
	f := newFixture(t)
	f.send(t, f.failures, f.failure(f.base, f.base.Add(4*time.Second), 3))
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": f.dynamoURL, "AWS_ENDPOINT_URL_SQS": f.motoURL, "AWS_ENDPOINT_URL_EVENTBRIDGE": f.motoURL,
		"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey, "AWS_REGION": testenv.Region,
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PROFILE": "",
	} {
		t.Setenv(k, v)
	}
	fn := eventsFunction{name: "stack-EventsFunction-1", env: map[string]string{
		"TABLE_NAME": f.table, "BUCKET_NAME": f.bucket, "EVENT_BUS_NAME": f.bus, "EVENT_SOURCE": "com.example.uploads",
		"IDEMPOTENCY_TTL": "36h",
	}}
	defer func(old func(aws.Config) functionsAPI) { newFunctions = old }(newFunctions)
	newFunctions = func(aws.Config) functionsAPI { return fn }

	var stdout, stderr bytes.Buffer
	if code := run([]string{"-queue-url", f.failures, "-function", "no-such-function"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "Function not found") {
		t.Errorf("an unknown function: exit %d, %s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"-queue-url", f.failures, "-function", fn.name, "-slack", "1m", "-dry-run"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr.String())
	}
	if !strings.Contains(out, "1 messages would be replayed (3 events)") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(out, "bus "+f.bus+", source com.example.uploads, bucket "+f.bucket+", table "+f.table) {
		t.Errorf("the function's settings are not the ones used:\n%s", out)
	}
	if !strings.Contains(out, ", ttl 36h0m0s\n") {
		t.Errorf("the function's IDEMPOTENCY_TTL is not the TTL used:\n%s", out)
	}
	for _, d := range []api.EventDetail{f.completed1, f.completed2, f.aborted} {
		if !strings.Contains(out, d.UploadID) {
			t.Errorf("upload %s is not replayed:\n%s", d.UploadID, out)
		}
		detail, _ := json.Marshal(d)
		if line := fmt.Sprintf("bus %s, source com.example.uploads: would publish %s %s\n", f.bus, want(d).DetailType, detail); !strings.Contains(out, line) {
			t.Errorf("output lacks %q, the entry with the function's bus and source:\n%s", line, out)
		}
	}

	// -ttl given overrides the function's.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"-queue-url", f.failures, "-function", fn.name, "-ttl", "2h", "-dry-run"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), ", ttl 2h0m0s\n") {
		t.Errorf("-ttl 2h: exit %d, want 0 and the TTL used 2h\n%s%s", code, stdout.String(), stderr.String())
	}

	// An IDEMPOTENCY_TTL that is not a Go duration is an error naming it.
	bad := eventsFunction{name: fn.name, env: maps.Clone(fn.env)}
	bad.env["IDEMPOTENCY_TTL"] = "24 hours"
	newFunctions = func(aws.Config) functionsAPI { return bad }
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"-queue-url", f.failures, "-function", fn.name, "-dry-run"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), `IDEMPOTENCY_TTL="24 hours"`) {
		t.Errorf("a bad IDEMPOTENCY_TTL: exit %d, stderr %s; want 1 and a message naming it", code, stderr.String())
	}
}
