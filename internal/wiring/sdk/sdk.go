// Package sdk is the AWS SDK configuration every function's clients are
// built on: the environment's, or a local server's. It creates no service
// client, so each function links only the clients it builds.
package sdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"
)

// Load returns *local if it is set, else the SDK's own configuration
// (config.LoadDefaultConfig): region, credentials, endpoints
// (AWS_ENDPOINT_URL_<SERVICE>), FIPS and dual-stack settings, retry mode
// and attempts come from the standard variables and files. No network
// call is made, so cold starts stay short. A configuration without a
// region is refused: every client would fail on it later.
func Load(ctx context.Context, local *aws.Config) (aws.Config, error) {
	var cfg aws.Config
	if local != nil {
		cfg = *local
	} else {
		var err error
		if cfg, err = config.LoadDefaultConfig(ctx); err != nil {
			return cfg, fmt.Errorf("aws config: %w", err)
		}
	}
	if cfg.Region == "" {
		return cfg, errors.New("aws config: no region (set AWS_REGION)")
	}
	return cfg, nil
}

// Local is the configuration of clients of local servers (the dev
// stack's, a benchmark's): their static credentials and region, and
// apiOptions on every client's stack. Nothing of the process's AWS
// environment, files or profile applies.
func Local(creds aws.CredentialsProvider, region string, apiOptions ...func(*middleware.Stack) error) *aws.Config {
	return &aws.Config{Region: region, Credentials: creds, APIOptions: apiOptions}
}
