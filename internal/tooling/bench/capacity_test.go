package bench

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/tableitem"
	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// The capacity of each path, measured on dynoxide, agrees with itself: a
// path's units are those of the records it read and wrote, by the rules;
// the server's ConsumedCapacity matches the rules wherever it reports, and
// is missing only from the failed conditional writes (the replays); a
// Lambda-length token in the presign credentials lands in the record.
func TestCapacitySelfConsistent(t *testing.T) {
	dynamoURL, s3URL := testenv.Dynoxide(t), testenv.Versity(t)
	table := testenv.NewTable(t, testenv.DynamoClient(dynamoURL, nil))
	bucket := testenv.NewBucket(t, testenv.S3Client(s3URL, nil))
	rep, err := MeasureCapacity(context.Background(), dynamoURL, table, s3URL, bucket, 1<<30)
	if err != nil {
		t.Fatal(err)
	}

	wantCalls := map[string]map[string]int{
		"create": {"PutItem": 1}, "replay-pending": {"PutItem": 1}, "replay-completed": {"PutItem": 1},
		"status": {"GetItem": 1}, "finalize": {"UpdateItem": 1}, "status-heal": {"GetItem": 1, "UpdateItem": 1},
		"finalize-after-heal": {"UpdateItem": 1}, "multipart-create": {"PutItem": 1, "Query": 1, "UpdateItem": 1}, "sign": {"GetItem": 1},
		"complete": {"GetItem": 1, "UpdateItem": 1}, "abort": {"GetItem": 1, "UpdateItem": 2},
	}
	for path, want := range wantCalls {
		if got := rep.Paths[path].Calls; !maps.Equal(got, want) {
			t.Errorf("%s: calls %v, want %v", path, got, want)
		}
	}
	for path, want := range map[string]map[string]int{
		"create": {"PutItem": 1}, "replay-pending": {"PutItem": 1}, "finalize": {"UpdateItem": 1},
		"replay-completed": {"PutItem": 1}, "status": {"GetItem": 1}, "status-heal": {"GetItem": 1, "UpdateItem": 1},
		"finalize-after-heal": {"UpdateItem": 1},
	} {
		if got := rep.PathsWithToken[path].Calls; !maps.Equal(got, want) {
			t.Errorf("%s with a token: calls %v, want %v", path, got, want)
		}
	}

	w := tableitem.WriteUnits
	for _, v := range []struct {
		paths              map[string]Capacity
		pending, completed int
		what               string
	}{
		{rep.Paths, rep.RecordBytes["pending_single"], rep.RecordBytes["completed_single"], ""},
		{rep.PathsWithToken, rep.RecordBytes["pending_single_with_token"], rep.RecordBytes["completed_single_with_token"], " with a token"},
	} {
		if v.pending == 0 || v.completed == 0 {
			t.Fatalf("record bytes%s: pending %d, completed %d", v.what, v.pending, v.completed)
		}
		for path, want := range map[string]int{
			"create":           w(v.pending),
			"replay-pending":   w(v.pending), // the stored item and the one sent are alike
			"finalize":         w(max(v.completed, v.pending)),
			"replay-completed": w(max(v.completed, v.pending)),
			"status-heal":      w(max(v.completed, v.pending)),
			// Refused: billed by the stored item alone.
			"finalize-after-heal": w(v.completed),
		} {
			if got := v.paths[path].WriteUnits; got != want {
				t.Errorf("%s%s: %d write units, want %d from the record's size", path, v.what, got, want)
			}
		}
		if got, want := v.paths["status"].ReadUnits, tableitem.ReadUnits(v.completed, true); got != want {
			t.Errorf("status%s: %v read units, want %v (a consistent read of %d bytes)", v.what, got, want, v.completed)
		}
	}
	// The token reached the presigner and the record holds it: as the bytes
	// its base64 encodes (three quarters of its length), or in the URL.
	if grew, least := rep.RecordBytes["pending_single_with_token"]-rep.RecordBytes["pending_single"], services.LambdaSessionTokenLength*3/4; grew < least {
		t.Errorf("a Lambda-length token grew the pending record by %d bytes, want at least %d", grew, least)
	}
	// Completed, the record holds neither the URL nor the token: one write
	// unit, which the refused finalize after every heal is billed.
	if completed := rep.RecordBytes["completed_single_with_token"]; w(completed) != 1 {
		t.Errorf("the completed single PUT with a token is %d bytes, %d write units; want 1", completed, w(completed))
	}
	// As on Lambda, the URL also names AWS's host, a longer bucket and a
	// temporary key id.
	if lambda, token := rep.RecordBytes["pending_single_on_lambda"], rep.RecordBytes["pending_single_with_token"]; lambda <= token {
		t.Errorf("a create signed as on Lambda stored %d bytes, no more than with the token alone (%d)", lambda, token)
	}
	if rep.MultipartParts != 128 || rep.RecordBytes["pending_multipart"] == 0 || rep.RecordBytes["completed_multipart"] == 0 {
		t.Errorf("multipart: %d parts, records %d and %d bytes", rep.MultipartParts, rep.RecordBytes["pending_multipart"], rep.RecordBytes["completed_multipart"])
	}

	for _, paths := range []map[string]Capacity{rep.Paths, rep.PathsWithToken} {
		for path, c := range paths {
			for _, call := range c.Detail {
				switch {
				case call.Reported == nil && !call.Failed:
					t.Errorf("%s: %s has no ConsumedCapacity", path, call.Op)
				case call.Reported != nil && *call.Reported != call.Units():
					t.Errorf("%s: %s: the server reported %v units, the rules give %v", path, call.Op, *call.Reported, call.Units())
				}
			}
		}
	}
	for _, path := range []string{"replay-pending", "replay-completed"} {
		if d := rep.Paths[path].Differences(); len(d) != 1 {
			t.Errorf("%s: differences %q, want the failed PutItem's only", path, d)
		}
	}
}

// A whole upload the CLI's way costs what its calls cost, the finalize
// that S3's event starts included; the functions' S3 requests are those
// sent, not the URLs presigned.
func TestUploadCapacity(t *testing.T) {
	testenv.SkipShort(t) // the local stack
	var meter Meter
	st, err := devstack.Start(context.Background(), devstack.Config{
		Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "capacity-test", Bucket: "capacity-test",
		APIOptions: []func(*middleware.Stack) error{meter.Middleware},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	peek := dynamodb.NewFromConfig(services.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(st.DynamoURL) })
	size := int64(client.MultipartThreshold)
	ups, err := MeasureUploadCapacity(context.Background(), st.APIURL, &meter, peek, 1<<10, size)
	if err != nil {
		t.Fatal(err)
	}
	single, multi := ups[UploadSingle], ups[UploadMultipart]
	wantParts := api.PartCount(size, client.PartSizeFor(size))
	if single.ClientPUTs != 1 || single.Parts != 0 || multi.Parts != wantParts || multi.ClientPUTs != wantParts {
		t.Errorf("client PUTs %d (parts %d) and %d (parts %d), want 1 (0) and %d (%d)", single.ClientPUTs, single.Parts, multi.ClientPUTs, multi.Parts, wantParts, wantParts)
	}
	for name, u := range ups {
		if u.Calls["PutItem"] != 1 {
			t.Errorf("%s: %d PutItem calls, want its one create", name, u.Calls["PutItem"])
		}
		// Presigning runs the S3 client's stack but sends nothing.
		if u.S3Requests["PutObject"] != 0 || u.S3Requests["UploadPart"] != 0 {
			t.Errorf("%s: the functions' S3 requests %v count presigned URLs", name, u.S3Requests)
		}
		if u.S3Requests["HeadObject"] == 0 {
			t.Errorf("%s: no HeadObject among the functions' S3 requests %v: the object was never confirmed", name, u.S3Requests)
		}
		again := Summarize(u.Detail)
		if again.WriteUnits != u.WriteUnits || again.ReadUnits != u.ReadUnits {
			t.Errorf("%s: %d write and %v read units, its calls add up to %d and %v", name, u.WriteUnits, u.ReadUnits, again.WriteUnits, again.ReadUnits)
		}
	}
	if multi.S3Requests["CreateMultipartUpload"] != 1 || multi.S3Requests["CompleteMultipartUpload"] != 1 || multi.Calls["GetItem"] == 0 {
		t.Errorf("multipart: S3 requests %v, DynamoDB calls %v", multi.S3Requests, multi.Calls)
	}
}
