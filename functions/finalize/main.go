// Command finalize is the Lambda function that S3 invokes for every object
// created under the upload prefix.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/onceupload/onceupload/internal/handlers/finalize"
	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/wiring"
)

func main() {
	logger := lambdacontext.NewLogger()
	slog.SetDefault(logger)
	svc, cfg, err := wiring.Finalize(context.Background(), os.LookupEnv, logger)
	if err != nil {
		logger.Error("finalize: cannot start", "error", err)
		os.Exit(1)
	}
	h := &finalize.Handler{Service: svc, Logger: logger,
		Telemetry: &telemetry.Recorder{Logger: logger, Namespace: cfg.MetricsNamespace, Function: "finalize"}}
	lambda.Start(h.Handle)
}
