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
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/pkg/awslite"
	appconfig "github.com/onceupload/onceupload/pkg/config"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/upload"
)

// Service builds the upload service. The SDK configuration comes from
// [AWSConfig]; endpoints from the SDK's standard variables
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3), and
// S3_FORCE_PATH_STYLE=true selects path-style S3 addressing for local
// servers. awsOpts adjust the SDK configuration afterwards (the local stack
// sets static credentials and its call counter). No network call is made
// here, so cold starts stay short.
func Service(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, awsOpts ...func(*aws.Config)) (*upload.Service, appconfig.Config, error) {
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
	for _, fn := range awsOpts {
		fn(&awsCfg)
	}
	s3Endpoint, _ := lookup("AWS_ENDPOINT_URL_S3")
	dynamoEndpoint, _ := lookup("AWS_ENDPOINT_URL_DYNAMODB")
	s3Client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, callcount.ScopeMiddleware) // calls per request, for its log line
		o.UsePathStyle = pathStyle
		if s3Endpoint != "" {
			o.BaseEndpoint = &s3Endpoint
		}
	})
	dynamoClient, err := awslite.NewDynamoDB(awsCfg, func(o *awslite.Options) {
		o.OnAttempt = callcount.CountInScope // calls per request, for its log line
		o.BaseEndpoint = dynamoEndpoint
	})
	if err != nil {
		return nil, cfg, err
	}
	store := idempotency.NewDynamoStore(dynamoClient, cfg.Table,
		func(o *idempotency.Options) { o.TTL = cfg.IdempotencyTTL })
	presigner, err := upload.NewSigV4Presigner(ctx, s3Client, cfg.Upload.Bucket)
	if err != nil {
		return nil, cfg, err
	}
	svc := upload.New(store, presigner, s3Client, cfg.Upload,
		func(o *upload.Options) { o.Logger = logger })
	return svc, cfg, nil
}
