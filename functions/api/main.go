// Command api is the Lambda function behind every route of the upload API:
// create, status, parts, complete and abort. template.yaml calls it
// PresignFunction, the name deployed stacks keep, and its metrics carry
// Function=presign for the same reason.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/onceupload/onceupload/internal/handlers/httpapi"
	"github.com/onceupload/onceupload/internal/telemetry"
	"github.com/onceupload/onceupload/internal/wiring"
)

func main() {
	logger := lambdacontext.NewLogger()
	slog.SetDefault(logger)
	svc, cfg, err := wiring.Presign(context.Background(), os.LookupEnv, logger)
	if err != nil {
		logger.Error("presign: cannot start", "error", err)
		os.Exit(1)
	}
	h := &httpapi.Handler{Service: svc, AllowAnonymous: cfg.AllowAnonymous, Logger: logger,
		Telemetry: &telemetry.Recorder{Logger: logger, Namespace: cfg.MetricsNamespace, Function: "presign"}}
	lambda.Start(h.Handle)
}
