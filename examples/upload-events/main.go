// Command upload-events is an example consumer of onceupload's upload
// events: a Lambda function on an EventBridge rule that indexes each
// completed upload once (package consumer), however often its
// Upload Completed event is delivered. template.yaml deploys it with its
// own idempotency table.
//
// With -listen it serves the same consumer over HTTP instead, at POST
// /events, for a local run against make dev:
//
//	go run ./examples/upload-events -listen 127.0.0.1:8090 \
//	    -endpoint http://127.0.0.1:8000 -create-table
//
// Settings: TABLE_NAME (-table; upload-events-local with -listen),
// EVENT_SOURCE (api.EventSource), IDEMPOTENCY_TTL (336h: the main stack's
// failure queue keeps a batch 14 days, and a replay after the record
// expired would index again).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/onceupload/onceupload/examples/upload-events/consumer"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

func main() {
	listen := flag.String("listen", "", "serve POST /events on this address (host:port) instead of running as a Lambda function")
	table := flag.String("table", os.Getenv("TABLE_NAME"), "the idempotency table (TABLE_NAME; upload-events-local with -listen)")
	endpoint := flag.String("endpoint", "", "a local DynamoDB's URL (make dev's is http://127.0.0.1:8000), called with static local credentials")
	create := flag.Bool("create-table", false, "create the table if it does not exist (for a local DynamoDB)")
	flag.Parse()

	var logger *slog.Logger
	if *listen == "" {
		logger = lambdacontext.NewLogger()
	} else {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		if *table == "" {
			*table = "upload-events-local"
		}
	}
	slog.SetDefault(logger)
	if err := run(*listen, *table, *endpoint, *create, logger); err != nil {
		logger.Error("upload-events: cannot run", "error", err)
		os.Exit(1)
	}
}

func run(listen, table, endpoint string, create bool, logger *slog.Logger) error {
	if listen == "" && os.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		return errors.New("not running in Lambda: give -listen host:port to serve POST /events")
	}
	if table == "" {
		return errors.New("no table: set TABLE_NAME or -table")
	}
	ttl, err := time.ParseDuration(env("IDEMPOTENCY_TTL", "336h"))
	if err != nil || ttl <= 0 {
		return fmt.Errorf("IDEMPOTENCY_TTL=%q: want a positive Go duration", os.Getenv("IDEMPOTENCY_TTL"))
	}
	ctx := context.Background()
	client, err := dynamoClient(ctx, endpoint)
	if err != nil {
		return err
	}
	if create {
		if err := createTable(ctx, client, table, logger); err != nil {
			return err
		}
	}
	// The table template.yaml declares: partition key "pk", TTL attribute
	// "expires_at", as idempotency.DefaultSchema() names them.
	store := dynamostore.New(client, table, func(o *idempotency.Options) { o.TTL = ttl })
	c := consumer.New(store, consumer.LogSink{Logger: logger}, func(o *consumer.Options) {
		o.Source = env("EVENT_SOURCE", api.EventSource)
		o.Logger = logger
	})
	if listen == "" {
		lambda.Start(c.Handle)
		return nil
	}
	return serve(listen, c, logger)
}

// serve runs c at POST /events on addr until SIGINT or SIGTERM.
func serve(addr string, c *consumer.Consumer, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("POST /events", c)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("upload-events: listening", "url", "http://"+addr+"/events")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), consumer.DefaultHTTPTimeout)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// dynamoClient is the SDK's client from the default configuration, or for
// a local endpoint, with the static credentials and region make dev uses.
func dynamoClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	if endpoint != "" {
		cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "localsecret", "")}
		return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }), nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	return dynamodb.NewFromConfig(cfg), nil
}

// createTable creates template.yaml's table unless it exists.
func createTable(ctx context.Context, client *dynamodb.Client, table string, logger *slog.Logger) error {
	_, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	var notFound *types.ResourceNotFoundException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &notFound):
		return fmt.Errorf("describe table %s: %w", table, err)
	}
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client)
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &table}, time.Minute); err != nil {
		return fmt.Errorf("table %s: %w", table, err)
	}
	logger.Info("upload-events: created table", "table", table)
	return nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
