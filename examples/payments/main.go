// Command payments is an example of pkg/idempotency/apigateway: a
// payments-style function behind an API Gateway HTTP API that charges at
// most once per Idempotency-Key. template.yaml deploys it with its table.
package main

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

func main() {
	logger := lambdacontext.NewLogger()
	slog.SetDefault(logger)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		logger.Error("payments: cannot load the AWS configuration", "error", err)
		os.Exit(1)
	}
	client := dynamodb.NewFromConfig(cfg)
	store := dynamostore.New(client, os.Getenv("TABLE_NAME"),
		func(o *idempotency.Options) { o.Schema = Schema })
	lambda.Start(NewHandler(store, demoCharger{}, logger).Handle)
}

// demoCharger stands in for a payment provider's client.
type demoCharger struct{}

func (demoCharger) Charge(context.Context, PaymentRequest) (string, error) {
	return "ch_" + rand.Text(), nil
}
