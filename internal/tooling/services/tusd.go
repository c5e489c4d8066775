package services

import (
	"context"
	"errors"
	"os"
	"strconv"
)

// TusdOptions configure StartTusd.
type TusdOptions struct {
	Options
	// S3URL is the S3 server (path style) and Bucket an existing bucket
	// there, where tusd's S3 store keeps uploads. Required.
	S3URL, Bucket string
	// TempDir is where tusd buffers parts before it sends them to S3
	// (TMPDIR). Defaults to the host's.
	TempDir string
}

// StartTusd starts tusd, the reference tus server (pinned in tools/go.mod,
// for the benchmark's resumable-upload peer), with its S3 store on S3URL,
// at Endpoint+"/files/". Its other settings are tusd's defaults (parts of
// 50 MiB, 10 sent to S3 at once).
func StartTusd(ctx context.Context, o TusdOptions) (*Process, error) {
	bin, err := Binary("tusd")
	if err != nil {
		return nil, err
	}
	if o.S3URL == "" || o.Bucket == "" {
		return nil, errors.New("start tusd: an S3 URL and a bucket are required")
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	env := []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=" + Region,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}
	if o.TempDir != "" {
		env = append(env, "TMPDIR="+o.TempDir)
	} else {
		env = append(env, "TMPDIR="+os.TempDir())
	}
	return startEnv(ctx, "tusd", port, o.LogPath, env, bin,
		"-host", "127.0.0.1", "-port", strconv.Itoa(port), "-base-path", "/files/",
		"-s3-bucket", o.Bucket, "-s3-endpoint", o.S3URL)
}
