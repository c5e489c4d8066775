// Package events builds the events function's handler, shared with the
// dev stack's in-process mode: the function's section of the environment,
// read by internal/config and nothing else, and the SDK's EventBridge
// client.
package events

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/config"
	"github.com/onceupload/onceupload/internal/handlers/events"
	"github.com/onceupload/onceupload/internal/wiring/sdk"
	"github.com/onceupload/onceupload/pkg/idempotency"
)

// Options adjust what New builds; the dev stack sets them.
type Options struct {
	// AWS, if set, is the SDK configuration, in place of the one
	// config.LoadDefaultConfig loads from the environment (local servers).
	AWS *aws.Config
	// EventBridge adjusts the client, for example its BaseEndpoint.
	EventBridge []func(*eventbridge.Options)
}

// New builds the handler from the events function's section of the
// environment, read through lookup (os.LookupEnv in the function) by
// config.LoadEvents, and an EventBridge client on the SDK's configuration
// (sdk.Load: AWS_ENDPOINT_URL_EVENTBRIDGE and the rest apply).
func New(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, optFns ...func(*Options)) (*events.Handler, error) {
	var opts Options
	for _, fn := range optFns {
		fn(&opts)
	}
	cfg, err := config.LoadEvents(lookup)
	if err != nil {
		return nil, err
	}
	awsCfg, err := sdk.Load(ctx, opts.AWS)
	if err != nil {
		return nil, err
	}
	return &events.Handler{
		Events: eventbridge.NewFromConfig(awsCfg, opts.EventBridge...),
		Bus:    cfg.Bus, Source: cfg.Source, Bucket: cfg.Bucket,
		Schema: idempotency.DefaultSchema(), Logger: logger,
	}, nil
}

// Local points the client at a local bus (the dev stack's) with its static
// credentials and region, and adds apiOptions to the client's stack.
func Local(eventsURL string, creds aws.CredentialsProvider, region string, apiOptions ...func(*middleware.Stack) error) func(*Options) {
	return func(o *Options) {
		o.AWS = sdk.Local(creds, region, apiOptions...)
		o.EventBridge = append(o.EventBridge, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(eventsURL) })
	}
}
