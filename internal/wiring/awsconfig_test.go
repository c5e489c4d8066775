package wiring

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestAWSConfigFromLambdaEnvironment(t *testing.T) {
	cases := []struct {
		name       string
		env        map[string]string
		wantRegion string
		wantKey    string
		wantToken  string
		wantErr    string
	}{
		{
			name:       "execution role keys",
			env:        map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_SESSION_TOKEN": "TOKEN"},
			wantRegion: "eu-west-1", wantKey: "AKID", wantToken: "TOKEN",
		},
		{
			name:       "AWS_DEFAULT_REGION when AWS_REGION is absent",
			env:        map[string]string{"AWS_DEFAULT_REGION": "us-west-2", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET"},
			wantRegion: "us-west-2", wantKey: "AKID",
		},
		{
			name:    "no region",
			env:     map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET"},
			wantErr: "AWS_REGION is not set",
		},
		{
			name:    "no credentials",
			env:     map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID"},
			wantErr: ErrNoCredentials.Error(),
		},
		{
			name:    "container endpoint over plain HTTP to another host",
			env:     map[string]string{"AWS_REGION": "eu-west-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://192.0.2.1/creds"},
			wantErr: "plain HTTP only to a loopback",
		},
		{
			name:    "container endpoint with another scheme",
			env:     map[string]string{"AWS_REGION": "eu-west-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "ftp://127.0.0.1/creds"},
			wantErr: "scheme must be http or https",
		},
		{
			name:    "container endpoint without a host",
			env:     map[string]string{"AWS_REGION": "eu-west-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "file:///etc/creds"},
			wantErr: "has no host",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := AWSConfig(lookupIn(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Region != tc.wantRegion {
				t.Errorf("Region = %q, want %q", cfg.Region, tc.wantRegion)
			}
			creds, err := cfg.Credentials.Retrieve(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if creds.AccessKeyID != tc.wantKey || creds.SessionToken != tc.wantToken {
				t.Errorf("credentials = %q/%q, want %q/%q", creds.AccessKeyID, creds.SessionToken, tc.wantKey, tc.wantToken)
			}
		})
	}
	if _, err := AWSConfig(lookupIn(map[string]string{"AWS_REGION": "x"})); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("err = %v, want ErrNoCredentials", err)
	}
}

// The container credentials endpoint, as Lambda serves it where it does not
// put keys in the environment: the token goes in the Authorization header
// (read from the file on every refresh), and the keys come back as JSON.
func TestAWSConfigFromContainerEndpoint(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, wantAuth string
		env            map[string]string
	}{
		{"token", "from-env", map[string]string{"AWS_CONTAINER_AUTHORIZATION_TOKEN": "from-env"}},
		{"token file", "from-file", map[string]string{"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotAuth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotAuth = r.Header.Get("Authorization")
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"AccessKeyId":"ASIA","SecretAccessKey":"S","Token":"T","Expiration":"` +
					time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`))
			}))
			defer srv.Close()
			env := map[string]string{"AWS_REGION": "eu-west-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": srv.URL + "/2018-06-01/credentials"}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := AWSConfig(lookupIn(env))
			if err != nil {
				t.Fatal(err)
			}
			creds, err := cfg.Credentials.Retrieve(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if creds.AccessKeyID != "ASIA" || creds.SessionToken != "T" || gotAuth != tc.wantAuth {
				t.Errorf("credentials %q/%q with Authorization %q; want ASIA/T with %q", creds.AccessKeyID, creds.SessionToken, gotAuth, tc.wantAuth)
			}
		})
	}
}

// Each refusal names the rule that refused: the empty string is an
// endpoint that is allowed.
func TestCheckContainerEndpoint(t *testing.T) {
	const notAgent = "plain HTTP only to a loopback or container agent address"
	for raw, wantErr := range map[string]string{
		"http://127.0.0.1:9001/creds":   "",
		"http://[::1]/creds":            "",
		"http://localhost/creds":        "",
		"http://169.254.170.2/v2/creds": "",
		"http://169.254.170.23/v1":      "",
		"http://[fd00:ec2::23]/v1":      "",
		"https://creds.example.com/":    "",
		"http://169.254.169.254/":       notAgent,
		"http://192.0.2.1/":             notAgent,
		"ftp://127.0.0.1/":              "scheme must be http or https",
		"http:///nohost":                "has no host",
	} {
		err := checkContainerEndpoint(raw)
		if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("checkContainerEndpoint(%q) = %v, want %q", raw, err, wantErr)
		}
	}
}
