package wiring

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
)

// ErrNoCredentials: the environment holds none of the credential sources
// Lambda provides.
var ErrNoCredentials = errors.New("no AWS credentials in the environment")

// AWSConfig returns the SDK configuration of a function running on Lambda,
// read through lookup (os.LookupEnv in a function):
//
//   - region from AWS_REGION, else AWS_DEFAULT_REGION;
//   - credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
//     AWS_SESSION_TOKEN, which Lambda sets from the execution role; else
//     from the container credentials endpoint AWS_CONTAINER_CREDENTIALS_FULL_URI
//     with AWS_CONTAINER_AUTHORIZATION_TOKEN (or _FILE), which Lambda uses
//     instead of the keys where an environment outlives one set of keys
//     (SnapStart), refreshed five minutes before they expire.
//
// It replaces config.LoadDefaultConfig, which also reads shared config
// files, SSO, web identity, process and IMDS credentials: none of those
// exist on Lambda, and their clients (SSO, SSO OIDC, STS, sign-in) made each
// bootstrap about 4 MB larger. Retries and the HTTP client are the SDK's
// defaults, which package awslite's clients take from this config.
func AWSConfig(lookup func(string) (string, bool)) (aws.Config, error) {
	get := func(name string) string { v, _ := lookup(name); return v }
	cfg := aws.Config{Region: get("AWS_REGION")}
	if cfg.Region == "" {
		cfg.Region = get("AWS_DEFAULT_REGION")
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("aws config: AWS_REGION is not set")
	}
	id, secret := get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")
	switch fullURI := get("AWS_CONTAINER_CREDENTIALS_FULL_URI"); {
	case id != "" && secret != "":
		cfg.Credentials = credentials.NewStaticCredentialsProvider(id, secret, get("AWS_SESSION_TOKEN"))
	case fullURI != "":
		if err := checkContainerEndpoint(fullURI); err != nil {
			return aws.Config{}, fmt.Errorf("aws config: AWS_CONTAINER_CREDENTIALS_FULL_URI: %w", err)
		}
		token, tokenFile := get("AWS_CONTAINER_AUTHORIZATION_TOKEN"), get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
		provider := endpointcreds.New(fullURI, func(o *endpointcreds.Options) {
			o.AuthorizationToken = token
			if tokenFile != "" {
				// Read on every refresh: the file may be rotated.
				o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
					b, err := os.ReadFile(tokenFile)
					if err != nil {
						return "", fmt.Errorf("read container authorization token: %w", err)
					}
					return string(b), nil
				})
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(provider, func(o *aws.CredentialsCacheOptions) {
			o.ExpiryWindow = 5 * time.Minute
		})
	default:
		return aws.Config{}, fmt.Errorf("aws config: %w (want AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_CONTAINER_CREDENTIALS_FULL_URI)", ErrNoCredentials)
	}
	return cfg, nil
}

// checkContainerEndpoint applies the SDK's rule for a full container
// credentials URI: HTTPS anywhere, plain HTTP only to a loopback address or
// to the link-local addresses of the ECS and EKS credential agents, so that
// credentials are never sent in the clear across a network.
func checkContainerEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	switch {
	case host == "":
		return fmt.Errorf("%q has no host", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return fmt.Errorf("%q: scheme must be http or https", raw)
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || containerAgentIPs[ip.String()] {
			return nil
		}
		return fmt.Errorf("%q: plain HTTP only to a loopback or container agent address", raw)
	}
	addrs, err := net.LookupHost(host)
	if err != nil {
		return fmt.Errorf("resolve %q: %w", host, err)
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() && !containerAgentIPs[ip.String()] {
			return fmt.Errorf("%q: %s resolves to %s, not a loopback or container agent address", raw, host, a)
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%q: %s resolves to no address", raw, host)
	}
	return nil
}

// containerAgentIPs are the ECS and EKS credential agents' addresses, in
// net.IP.String form.
var containerAgentIPs = map[string]bool{"169.254.170.2": true, "169.254.170.23": true, "fd00:ec2::23": true}
