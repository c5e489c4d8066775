// Package wiring builds the upload service from the environment: the one
// place that reads configuration and creates AWS clients, shared by the
// Lambda functions and the dev stack's in-process mode.
package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/callcount"
	appconfig "github.com/onceupload/onceupload/internal/config"
	"github.com/onceupload/onceupload/internal/handlers/publish"
	"github.com/onceupload/onceupload/internal/recordstore"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
)

// Options adjust what Service builds; the dev stack and the benchmarks set
// them.
type Options struct {
	// AWS, if set, is the SDK configuration, in place of the one
	// config.LoadDefaultConfig loads from the environment (local servers).
	AWS *aws.Config
	// DynamoDB and S3 adjust the clients, for example their BaseEndpoint.
	DynamoDB    []func(*dynamodb.Options)
	S3          []func(*s3.Options)
	EventBridge []func(*eventbridge.Options)
}

// Service builds the upload service on the SDK's DynamoDB and S3 clients.
// The SDK configuration is the SDK's own (config.LoadDefaultConfig), so
// region, credentials, endpoints (AWS_ENDPOINT_URL_DYNAMODB,
// AWS_ENDPOINT_URL_S3), FIPS and dual-stack settings, retry mode and
// attempts come from the standard variables and files; the service's own
// settings are read through lookup (os.LookupEnv in a function), and
// S3_FORCE_PATH_STYLE=true selects path-style S3 addressing for local
// servers. No network call is made here, so cold starts stay short.
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
	awsCfg, err := loadAWS(ctx, opts)
	if err != nil {
		return nil, cfg, err
	}
	// Every attempt counts toward the request's round trips, for its log
	// line (callcount.WithScope).
	awsCfg.APIOptions = append(slices.Clone(awsCfg.APIOptions), callcount.ScopeAPIOptions)
	s3Client := s3.NewFromConfig(awsCfg, append([]func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = pathStyle }}, opts.S3...)...)
	dynamoClient := dynamodb.NewFromConfig(awsCfg, opts.DynamoDB...)
	store := recordstore.NewDynamoStore(dynamoClient, cfg.Table,
		func(o *recordstore.Options) { o.TTL = cfg.IdempotencyTTL })
	presigner := upload.NewPresigner(s3Client, cfg.Upload.Bucket)
	svc := upload.New(store, presigner, s3Client, cfg.Upload,
		func(o *upload.Options) { o.Logger = logger })
	return svc, cfg, nil
}

// loadAWS is the SDK configuration: opts.AWS, or the environment's.
func loadAWS(ctx context.Context, opts Options) (aws.Config, error) {
	var awsCfg aws.Config
	if opts.AWS != nil {
		awsCfg = *opts.AWS
	} else {
		var err error
		if awsCfg, err = config.LoadDefaultConfig(ctx); err != nil {
			return awsCfg, fmt.Errorf("aws config: %w", err)
		}
	}
	if awsCfg.Region == "" {
		return awsCfg, errors.New("aws config: no region (set AWS_REGION)")
	}
	return awsCfg, nil
}

// Publisher builds the events function's handler: the bucket and table
// settings as Service reads them, EVENT_BUS_NAME (default "default") and
// EVENT_SOURCE (default api.EventSource), and an EventBridge client on the
// SDK's configuration (AWS_ENDPOINT_URL_EVENTBRIDGE and the rest apply).
func Publisher(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, optFns ...func(*Options)) (*publish.Handler, error) {
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	cfg, err := appconfig.Load(lookup)
	if err != nil {
		return nil, err
	}
	setting := func(name, def string) string {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	bus, source := setting("EVENT_BUS_NAME", "default"), setting("EVENT_SOURCE", api.EventSource)
	if strings.HasPrefix(source, "aws.") {
		return nil, fmt.Errorf("invalid configuration: EVENT_SOURCE=%q: sources starting with \"aws.\" are AWS's own", source)
	}
	awsCfg, err := loadAWS(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &publish.Handler{
		Events: eventbridge.NewFromConfig(awsCfg, opts.EventBridge...),
		Bus:    bus, Source: source, Bucket: cfg.Upload.Bucket,
		Schema: recordstore.DefaultSchema(), Logger: logger,
	}, nil
}

// Local points the clients at local servers (the dev stack's, a
// benchmark's) with their static credentials and region, and adds
// apiOptions to every client's stack. Nothing of the process's AWS
// environment, files or profile applies.
func Local(dynamoURL, s3URL string, creds aws.CredentialsProvider, region string, apiOptions ...func(*middleware.Stack) error) func(*Options) {
	return func(o *Options) {
		o.AWS = &aws.Config{Region: region, Credentials: creds, APIOptions: apiOptions}
		o.DynamoDB = append(o.DynamoDB, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoURL) })
		o.S3 = append(o.S3, func(o *s3.Options) { o.BaseEndpoint = aws.String(s3URL) })
	}
}
