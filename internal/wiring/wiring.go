// Package wiring builds the upload service of the presign and finalize
// functions, shared with the dev stack's in-process mode: the function's
// section of the environment, read by internal/config and nothing else,
// and the SDK's DynamoDB and S3 clients. The events function's handler is
// built by wiring/events, so that these two functions do not link its
// EventBridge client.
package wiring

import (
	"context"
	"log/slog"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/internal/config"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/internal/wiring/sdk"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// Options adjust what Service builds; the dev stack and the benchmarks set
// them.
type Options struct {
	// AWS, if set, is the SDK configuration, in place of the one
	// config.LoadDefaultConfig loads from the environment (local servers).
	AWS *aws.Config
	// DynamoDB and S3 adjust the clients, for example their BaseEndpoint.
	DynamoDB []func(*dynamodb.Options)
	S3       []func(*s3.Options)
}

// Presign builds the presign function's service from its section of the
// environment, read through lookup (os.LookupEnv in the function) by
// config.LoadPresign, which reports every bad value at once.
func Presign(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, optFns ...func(*Options)) (*upload.Service, config.Presign, error) {
	cfg, err := config.LoadPresign(lookup)
	if err != nil {
		return nil, cfg, err
	}
	svc, err := Service(ctx, cfg.Service, logger, optFns...)
	return svc, cfg, err
}

// Finalize builds the finalize function's service, as Presign.
func Finalize(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, optFns ...func(*Options)) (*upload.Service, config.Finalize, error) {
	cfg, err := config.LoadFinalize(lookup)
	if err != nil {
		return nil, cfg, err
	}
	svc, err := Service(ctx, cfg.Service, logger, optFns...)
	return svc, cfg, err
}

// Service builds the upload service from its settings on the SDK's
// DynamoDB and S3 clients (sdk.Load), and logs the settings' warnings.
// The record store keeps keys cfg.IdempotencyTTL, and the service takes
// that from it.
func Service(ctx context.Context, cfg config.Service, logger *slog.Logger, optFns ...func(*Options)) (*upload.Service, error) {
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	for _, w := range cfg.Warnings {
		logger.WarnContext(ctx, "configuration: "+w)
	}
	awsCfg, err := sdk.Load(ctx, opts.AWS)
	if err != nil {
		return nil, err
	}
	// Every attempt counts toward the request's round trips, for its log
	// line (callcount.WithScope).
	awsCfg.APIOptions = append(slices.Clone(awsCfg.APIOptions), callcount.ScopeAPIOptions)
	s3Client := s3.NewFromConfig(awsCfg, append([]func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = cfg.S3ForcePathStyle }}, opts.S3...)...)
	dynamoClient := dynamodb.NewFromConfig(awsCfg, opts.DynamoDB...)
	store := dynamostore.New(dynamoClient, cfg.Table,
		func(o *idempotency.Options) { o.TTL = cfg.IdempotencyTTL })
	presigner := upload.NewPresigner(s3Client, cfg.Upload.Bucket)
	return upload.New(store, presigner, s3Client, cfg.Upload,
		func(o *upload.Options) { o.Logger = logger }), nil
}

// Local points the clients at local servers (the dev stack's, a
// benchmark's) with their static credentials and region, and adds
// apiOptions to every client's stack (sdk.Local).
func Local(dynamoURL, s3URL string, creds aws.CredentialsProvider, region string, apiOptions ...func(*middleware.Stack) error) func(*Options) {
	return func(o *Options) {
		o.AWS = sdk.Local(creds, region, apiOptions...)
		o.DynamoDB = append(o.DynamoDB, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoURL) })
		o.S3 = append(o.S3, func(o *s3.Options) { o.BaseEndpoint = aws.String(s3URL) })
	}
}
