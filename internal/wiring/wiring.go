// Package wiring builds the upload service from the environment: the one
// place that reads configuration and creates AWS clients, shared by the
// Lambda functions and the local stack's in-process mode.
package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/pkg/awslite"
	appconfig "github.com/onceupload/onceupload/pkg/config"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/upload"
)

// Options adjust what Service builds; the local stack sets them.
type Options struct {
	// AWS adjusts the SDK configuration read from the environment.
	AWS func(*aws.Config)
	// OnAttempt also sees every DynamoDB and S3 attempt (a benchmark's
	// counter), besides the count each request keeps for its log line.
	OnAttempt func(ctx context.Context, service, operation string)
}

// Service builds the upload service on package awslite's DynamoDB and S3
// clients, which keep the functions' binaries small. The SDK configuration
// comes from [AWSConfig]; endpoints from the SDK's standard variables
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3), and
// S3_FORCE_PATH_STYLE=true selects path-style S3 addressing for local
// servers. optFns adjust what is built (the local stack's credentials and
// call counter). No network call is made here, so cold starts stay short.
func Service(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, optFns ...func(*Options)) (*upload.Service, appconfig.Config, error) {
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	cfg, err := appconfig.Load(lookup)
	if err != nil {
		return nil, cfg, err
	}
	for _, w := range cfg.Warnings {
		logger.WarnContext(ctx, "configuration: "+w)
	}
	pathStyle := false
	if v, ok := lookup("S3_FORCE_PATH_STYLE"); ok && v != "" {
		if pathStyle, err = strconv.ParseBool(v); err != nil {
			return nil, cfg, fmt.Errorf("invalid configuration: S3_FORCE_PATH_STYLE=%q: want true or false", v)
		}
	}
	awsCfg, err := AWSConfig(lookup)
	if err != nil {
		return nil, cfg, err
	}
	if opts.AWS != nil {
		opts.AWS(&awsCfg)
	}
	onAttempt := callcount.CountInScope // calls per request, for its log line
	if extra := opts.OnAttempt; extra != nil {
		onAttempt = func(ctx context.Context, service, op string) {
			callcount.CountInScope(ctx, service, op)
			extra(ctx, service, op)
		}
	}
	s3Endpoint, _ := lookup("AWS_ENDPOINT_URL_S3")
	dynamoEndpoint, _ := lookup("AWS_ENDPOINT_URL_DYNAMODB")
	s3Client, err := awslite.NewS3(awsCfg, func(o *awslite.Options) {
		o.OnAttempt = onAttempt
		o.UsePathStyle = pathStyle
		o.BaseEndpoint = s3Endpoint
	})
	if err != nil {
		return nil, cfg, err
	}
	dynamoClient, err := awslite.NewDynamoDB(awsCfg, func(o *awslite.Options) {
		o.OnAttempt = onAttempt
		o.BaseEndpoint = dynamoEndpoint
	})
	if err != nil {
		return nil, cfg, err
	}
	store := idempotency.NewDynamoStore(dynamoClient, cfg.Table,
		func(o *idempotency.Options) { o.TTL = cfg.IdempotencyTTL })
	presigner := upload.NewPresignerAt(s3Client.BucketEndpoint(cfg.Upload.Bucket), awsCfg.Region, awsCfg.Credentials)
	svc := upload.New(store, presigner, s3Client, cfg.Upload,
		func(o *upload.Options) { o.Logger = logger })
	return svc, cfg, nil
}
