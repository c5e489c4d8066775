// Command events is the Lambda function that reads the idempotency table's
// stream and puts one Upload Completed or Upload Aborted event on
// EventBridge for each upload that becomes completed or aborted.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/onceupload/onceupload/internal/wiring/events"
)

func main() {
	logger := lambdacontext.NewLogger()
	slog.SetDefault(logger)
	h, err := events.New(context.Background(), os.LookupEnv, logger)
	if err != nil {
		logger.Error("events: cannot start", "error", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
