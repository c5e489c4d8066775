// Command replay-failed re-invokes the finalize function with the S3 events
// that it could not record, from the failure queue that Lambda sends them
// to after its retries (the stack's FailureQueueUrl output).
//
//	replay-failed -queue-url URL -function NAME [-max N] [-dry-run]
//
// Each queue message is a Lambda on-failure destination record; its
// requestPayload is the original S3 event. A message is deleted only once
// finalize has accepted its event again; one that fails stays in the queue
// (and becomes visible again after its visibility timeout). Replaying is
// safe: finalize ignores events it already recorded. Credentials, region
// and endpoints come from the usual AWS environment and files.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/onceupload/onceupload/internal/sqsdrain"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay-failed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queueURL := fs.String("queue-url", "", "the failure queue's URL (the stack's FailureQueueUrl output)")
	function := fs.String("function", "", "the finalize function's name (the stack's FinalizeFunctionName output)")
	limit := fs.Int("max", 1000, "replay at most this many events")
	dryRun := fs.Bool("dry-run", false, "print what would be replayed; change nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *queueURL == "" || *function == "" {
		fmt.Fprintln(stderr, "replay-failed: -queue-url and -function are required (see -h)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "replay-failed: AWS configuration: %v\n", err)
		return 1
	}
	r := &replayer{queue: &sqsdrain.Reader{Client: sqs.NewFromConfig(cfg), URL: *queueURL, Visibility: visibility}, fn: lambda.NewFromConfig(cfg), function: *function, dryRun: *dryRun, log: stdout}
	res, err := r.run(ctx, *limit)
	fmt.Fprintf(stdout, "replay-failed: %d replayed, %d failed (left in the queue), %d unreadable (left in the queue)\n", res.replayed, res.failed, res.unreadable)
	if err != nil {
		fmt.Fprintf(stderr, "replay-failed: %v\n", err)
		return 1
	}
	if res.failed+res.unreadable > 0 {
		return 1
	}
	return 0
}
