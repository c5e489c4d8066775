package iamcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// recorder records the SDK operations each function sends, by the
// function's logical id that devstack's InvocationContext puts in the
// context; "" is a call made outside any invocation.
type recorder struct {
	mu  sync.Mutex
	ops map[string]map[string]bool
}

type functionKey struct{}

func (r *recorder) middleware(stack *middleware.Stack) error {
	// After the retry step, as callcount counts: every attempt is a request
	// AWS authorizes.
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("iamcheck-record",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			fn, _ := ctx.Value(functionKey{}).(string)
			r.mu.Lock()
			if r.ops[fn] == nil {
				r.ops[fn] = map[string]bool{}
			}
			r.ops[fn][awsmiddleware.GetOperationName(ctx)] = true
			r.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// The list of calls (calls) holds every SDK operation the functions really
// send: a realistic flow runs through the local stack (single PUT, its
// replay and status; an upload in parts, signed, sent, completed; another
// signed, one part sent, listed and aborted; finalize on S3's events; the
// events function on the table's stream), and each operation a function
// sends must be listed as one of its calls, so a new SDK call cannot reach
// AWS without the simulation deciding whether its role may make it.
func TestRecordedCallsAreListed(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	rec := &recorder{ops: map[string]map[string]bool{}}
	sink := testenv.NewEventSink(t)
	st, err := devstack.Start(context.Background(), devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "iamcheck", Bucket: "iamcheck", EventsURL: sink.URL,
		APIOptions: []func(*middleware.Stack) error{rec.middleware},
		InvocationContext: func(ctx context.Context, fn string) context.Context {
			return context.WithValue(ctx, functionKey{}, fn)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.EventsEnabled {
		t.Fatal("the local stack reads no table stream: the events function would not run")
	}
	c, err := client.New(st.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}

	// One PUT, completed by finalize on S3's event; its replay; its status.
	small := random(10_000)
	one, err := c.UploadReader(ctx, bytes.NewReader(small), int64(len(small)), client.UploadInput{Filename: "one.bin", ContentType: "application/octet-stream"})
	if err != nil || one.Upload.Status != api.StatusCompleted {
		t.Fatalf("single PUT: %+v %v", one, err)
	}
	if again, err := c.UploadReader(ctx, bytes.NewReader(small), int64(len(small)), client.UploadInput{Key: one.Key, Filename: "one.bin", ContentType: "application/octet-stream"}); err != nil || !again.Replayed {
		t.Fatalf("replay: %+v %v", again, err)
	}
	if _, err := c.Status(ctx, one.Upload.UploadID); err != nil {
		t.Fatal(err)
	}

	// In parts: create, sign, send, complete.
	big := random(2*api.MinPartSize + 1000)
	parts, err := c.UploadReader(ctx, bytes.NewReader(big), int64(len(big)), client.UploadInput{Filename: "parts.bin", ContentType: "application/octet-stream", PartSize: api.MinPartSize})
	if err != nil || parts.Upload.Status != api.StatusCompleted {
		t.Fatalf("in parts: %+v %v", parts, err)
	}

	// In parts again: one part sent, the parts listed, then aborted.
	created, err := c.Create(ctx, client.NewKey(), api.CreateRequest{Filename: "abort.bin", ContentType: "application/octet-stream", Size: int64(len(big)), PartSize: api.MinPartSize})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Upload.UploadID
	sum := sha256.Sum256(big[:api.MinPartSize])
	signed, err := c.SignParts(ctx, id, []api.PartToSign{{PartNumber: 1, SHA256: hex.EncodeToString(sum[:])}})
	if err != nil {
		t.Fatal(err)
	}
	if code := testenv.PutPart(signed[0], big[:api.MinPartSize]); code != 200 {
		t.Fatalf("part 1: %d", code)
	}
	if held, err := c.ListParts(ctx, id); err != nil || len(held) != 1 {
		t.Fatalf("list parts: %v %v", held, err)
	}
	if aborted, err := c.Abort(ctx, id); err != nil || aborted.Status != api.StatusAborted {
		t.Fatalf("abort: %+v %v", aborted, err)
	}
	if _, err := c.Status(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Each completed or aborted upload makes one event (the events function).
	sink.WaitFor(t, one.Upload.UploadID, parts.Upload.UploadID, id)

	// Every deployment lists the same SDK calls; KMS and tracing add none.
	listed := map[string]map[string]bool{}
	for _, c := range deployments(t)[0].calls(t) {
		if c.by != byFunction {
			continue
		}
		if listed[c.function] == nil {
			listed[c.function] = map[string]bool{}
		}
		listed[c.function][c.op] = true
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for fn, ops := range rec.ops {
		var sent []string
		for op := range ops {
			sent = append(sent, op)
			if !listed[fn][op] {
				who := fn
				if fn == "" {
					who = "a call outside any invocation"
				}
				t.Errorf("%s sends %s, which calls (calls_test.go) does not list: add it with the IAM action AWS checks for it", who, op)
			}
		}
		sort.Strings(sent)
		t.Logf("%s sent %s", fn, strings.Join(sent, ", "))
	}
	for fn, ops := range listed {
		for op := range ops {
			if !rec.ops[fn][op] {
				// Listed calls of paths this flow does not take (a claim
				// released after a failed create, an object removed after a
				// race) stay listed: only a missing one is an error.
				t.Logf("%s: %s is listed but this flow did not send it", fn, op)
			}
		}
	}
	for _, fn := range []string{"PresignFunction", "FinalizeFunction", "EventsFunction"} {
		if len(rec.ops[fn]) == 0 {
			t.Errorf("%s sent nothing: the flow did not reach it", fn)
		}
	}
}
