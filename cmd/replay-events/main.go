// Command replay-events publishes again the upload events of the table
// stream batches that the events function could not publish, from the
// queue that Lambda names them in after its retries (the stack's
// EventsFailureQueueUrl output).
//
//	replay-events -queue-url URL -function NAME [-slack 5m] [-ttl 24h] [-max N] [-dry-run] [-skip-unreadable]
//	replay-events -queue-url URL -table NAME -bucket NAME [-bus NAME] [-source onceupload] […]
//
// -function names the events function (the stack's EventsFunctionName
// output): the table, bucket, bus, source and TTL are then read from its
// own environment, so the events replayed are the ones it would have put (a
// wrong bucket would change every detail, which consumers would refuse as
// another request under the same upload id; a wrong source would match no
// rule, and the messages would be deleted all the same). Flags given as
// well override what it says.
//
// A stream's on-failure record holds no records, only where the batch was
// (its DDBStreamBatchInfo: shard, sequence numbers, and the approximate
// arrival times of its first and last record, to the second), so the
// events are rebuilt from the table: for each message, the window from
// its first record's arrival minus -slack to its last one's plus -slack;
// messages whose windows overlap are grouped and their window scanned once
// (a consistent, paginated Scan) for the uploads that are completed or
// aborted and whose record was written in the window (updated_at) or
// whose completion or abort time (data.completed_at) falls in it. Each
// such upload's Upload Completed or Upload Aborted event is put on the bus,
// built by the events function's own code (events.Handler.PublishItems).
//
// Delivery is at least once: the window holds the failed batch's uploads
// and may hold others, whose events were already delivered; they are put
// again, with a new event id but the same detail, and consumers
// deduplicate on uploadId (docs/api.md, "Events"). A message is deleted
// only once every event of its window was put; one whose events were not
// all put stays in the queue, as does one that is not an on-failure record
// of -table's stream (counted as unreadable). Replaying a message twice is
// harmless.
//
// An item of a window that is completed or aborted but cannot be shaped
// into an event (not an upload's record, or one this code cannot read)
// stops the publishing of its window, so its messages stay in the queue on
// every run, and the output names the failure. Once an operator has looked
// at it, -skip-unreadable drops such items (naming each) and publishes the
// rest: the items dropped have no events.
//
// Records that expired from the table (its TTL, the stack's
// IdempotencyTtl: -ttl here, or the function's IDEMPOTENCY_TTL) cannot be
// replayed: their uploads are not found, and their events are lost.
// Replay within that time; the command counts the messages whose window
// began longer ago than -ttl, whose uploads may be gone in part or whole
// (DynamoDB deletes expired items some time after they expire, so some may
// still be found and published).
//
// The messages are received (up to -max) before any is replayed, hidden
// from other readers for 15 minutes (a run that takes longer may see a
// delete refused), and those not deleted are made visible again when the
// run ends. -dry-run prints what would be published (each entry PutEvents
// would be given: bus, source, detail-type and detail) and deleted, and
// changes nothing. Credentials, region and endpoints come from the usual
// AWS environment and files.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/onceupload/onceupload/internal/handlers/events"
	"github.com/onceupload/onceupload/internal/sqsdrain"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay-events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queueURL := fs.String("queue-url", "", "the events failure queue's URL (the stack's EventsFailureQueueUrl output)")
	table := fs.String("table", "", "the idempotency table's name")
	bucket := fs.String("bucket", "", "the upload bucket's name, which the events name")
	bus := fs.String("bus", "default", "the event bus (the stack's EventBusName parameter)")
	source := fs.String("source", api.EventSource, "the events' source (the stack's EventSource parameter)")
	slack := fs.Duration("slack", 5*time.Minute, "widen each batch's window by this much on both sides")
	ttl := fs.Duration("ttl", idempotency.DefaultTTL, "how long the table keeps a record after its last write (the stack's IdempotencyTtl)")
	limit := fs.Int("max", 1000, "replay at most this many messages")
	dryRun := fs.Bool("dry-run", false, "print what would be published and deleted; change nothing")
	skipUnreadable := fs.Bool("skip-unreadable", false, "publish the rest of a window whose items include some that are not uploads' records this code can read (each is named in the output, and has no event); without it, such a window's messages stay in the queue")
	function := fs.String("function", "", "the events function (the stack's EventsFunctionName output), whose environment gives -table, -bucket, -bus, -source and -ttl")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "replay-events: AWS configuration: %v\n", err)
		return 1
	}
	if *function != "" {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		env, err := functionEnv(ctx, newFunctions(cfg), *function)
		if err != nil {
			fmt.Fprintf(stderr, "replay-events: %v\n", err)
			return 1
		}
		for name, p := range map[string]*string{"table": table, "bucket": bucket, "bus": bus, "source": source} {
			if v := env[envOf[name]]; v != "" && !given[name] {
				*p = v
			}
		}
		if v := env[envTTL]; v != "" && !given["ttl"] {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				fmt.Fprintf(stderr, "replay-events: function %s has %s=%q, not a positive Go duration (give -ttl)\n", *function, envTTL, v)
				return 1
			}
			*ttl = d
		}
	}
	if *queueURL == "" || *table == "" || *bucket == "" {
		fmt.Fprintln(stderr, "replay-events: -queue-url and either -function or -table and -bucket are required (see -h)")
		return 2
	}
	if *slack < 0 || *ttl <= 0 || *limit <= 0 || strings.HasPrefix(*source, "aws.") || *source == "" || *bus == "" {
		fmt.Fprintln(stderr, "replay-events: -slack must not be negative, -ttl and -max must be positive, and -bus and -source set (a source not starting with \"aws.\")")
		return 2
	}
	fmt.Fprintf(stdout, "replay-events: bus %s, source %s, bucket %s, table %s, ttl %s\n", *bus, *source, *bucket, *table, *ttl)
	schema := idempotency.DefaultSchema()
	// A dry run builds the very entries a run would put, and prints them.
	var bridge events.EventBridgeAPI = eventbridge.NewFromConfig(cfg)
	if *dryRun {
		bridge = dryEvents{log: stdout}
	}
	r := &replayer{
		queue: &sqsdrain.Reader{Client: sqs.NewFromConfig(cfg), URL: *queueURL, Visibility: visibility}, table: dynamodb.NewFromConfig(cfg),
		publisher: &events.Handler{
			Events: bridge, Bus: *bus, Source: *source, Bucket: *bucket,
			Schema: schema, Logger: slog.New(slog.NewTextHandler(stderr, nil)),
		},
		tableName: *table, bucket: *bucket, schema: schema,
		slack: *slack, ttl: *ttl, now: time.Now, dryRun: *dryRun, skipUnreadable: *skipUnreadable, log: stdout,
	}
	res, err := r.run(ctx, *limit)
	verb := "replayed"
	if *dryRun {
		verb = "would be replayed"
	}
	fmt.Fprintf(stdout, "replay-events: %d messages %s (%d events), %d failed (left in the queue), %d unreadable (left in the queue)\n",
		res.replayed, verb, res.events, res.failed, res.unreadable)
	if res.skipped > 0 {
		fmt.Fprintf(stdout, "replay-events: %d items that cannot be made into events skipped (-skip-unreadable): they have no events\n", res.skipped)
	}
	if res.old > 0 {
		fmt.Fprintf(stdout, "replay-events: %d messages' windows began more than -ttl %s ago: uploads of theirs may have expired from the table, and their events cannot be replayed\n", res.old, *ttl)
	}
	if err != nil {
		fmt.Fprintf(stderr, "replay-events: %v\n", err)
		return 1
	}
	if res.failed+res.unreadable > 0 {
		return 1
	}
	return 0
}

// envOf maps the string flags -function fills to the events function's
// variables; envTTL is -ttl's (a Go duration).
var envOf = map[string]string{"table": "TABLE_NAME", "bucket": "BUCKET_NAME", "bus": "EVENT_BUS_NAME", "source": "EVENT_SOURCE"}

const envTTL = "IDEMPOTENCY_TTL"

// functionsAPI is the Lambda call -function makes; *lambda.Client has it.
type functionsAPI interface {
	GetFunctionConfiguration(ctx context.Context, in *lambda.GetFunctionConfigurationInput, optFns ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error)
}

// newFunctions makes the Lambda client; tests replace it.
var newFunctions = func(cfg aws.Config) functionsAPI { return lambda.NewFromConfig(cfg) }

// functionEnv is a function's environment variables.
func functionEnv(ctx context.Context, client functionsAPI, name string) (map[string]string, error) {
	out, err := client.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: &name})
	if err != nil {
		return nil, fmt.Errorf("read the events function's settings: %w", err)
	}
	if out.Environment == nil || out.Environment.Variables["TABLE_NAME"] == "" {
		return nil, fmt.Errorf("function %s has no TABLE_NAME: is it the stack's events function (EventsFunctionName)?", name)
	}
	return out.Environment.Variables, nil
}
