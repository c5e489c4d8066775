package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// LargeFile compares ways of sending one large file to the same local S3:
// the upload CLI in parts, the upload CLI in one PUT, and `aws s3 cp`.
// Each run is a whole process, from start to exit (hashing included for
// the CLI; the AWS CLI computes MD5s of its parts).
type LargeFile struct {
	Bytes int64 `json:"bytes"`
	// PartSize and Parallel are the CLI's, in parts.
	PartSize int64 `json:"part_size"`
	Parallel int   `json:"parallel"`
	// Ways holds each way's runs, in the order above; a way that could
	// not run has none and a Note.
	Ways []LargeFileWay `json:"ways"`
}

// LargeFileWay is one way of sending the file, run several times.
type LargeFileWay struct {
	Name string `json:"name"`
	// Seconds are the runs' wall times; MedianMiBps is the size over the
	// median run.
	Seconds     []float64 `json:"seconds"`
	MedianMiBps float64   `json:"median_mib_per_second"`
	// PeakRSSKiB is the largest resident set of the process over the runs
	// (getrusage of the child: ru_maxrss).
	PeakRSSKiB int64  `json:"peak_rss_kib"`
	Command    string `json:"command"`
	Note       string `json:"note,omitempty"`
}

// LargeFileConfig says what to measure.
type LargeFileConfig struct {
	Dir       string // for the file, the state files and the AWS config
	Bytes     int64
	Runs      int
	APIURL    string
	S3URL     string
	Bucket    string
	UploadCLI string // the built cmd/upload binary
	AWS       string // the AWS CLI, or "" to skip it
	PartSize  int64
	Parallel  int
	// Between runs, to keep the disk from filling: removes what the run
	// stored.
	Clean func(ctx context.Context) error
}

// MeasureLargeFile writes a file of random bytes and sends it each way,
// the ways interleaved run by run so that drift on a shared machine hits
// them alike.
func MeasureLargeFile(ctx context.Context, cfg LargeFileConfig) (LargeFile, error) {
	out := LargeFile{Bytes: cfg.Bytes, PartSize: cfg.PartSize, Parallel: cfg.Parallel}
	file := filepath.Join(cfg.Dir, "large.bin")
	if err := writeRandom(file, cfg.Bytes); err != nil {
		return out, err
	}
	defer os.Remove(file)

	awsConfig := filepath.Join(cfg.Dir, "aws-config")
	awsEnv := append(os.Environ(), "AWS_CONFIG_FILE="+awsConfig, "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=localsecret", "AWS_DEFAULT_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
	type way struct {
		LargeFileWay
		cmd func(run int) *exec.Cmd
	}
	upload := func(partSize string) func(int) *exec.Cmd {
		return func(run int) *exec.Cmd {
			return exec.CommandContext(ctx, cfg.UploadCLI, "--api", cfg.APIURL, "--state", filepath.Join(cfg.Dir, fmt.Sprintf("state-%s-%d.json", partSize, run)),
				"--part-size", partSize, "--parallel", fmt.Sprint(cfg.Parallel), "--quiet", file)
		}
	}
	ways := []*way{
		{LargeFileWay: LargeFileWay{Name: "upload CLI, parts", Command: fmt.Sprintf("upload --part-size %d --parallel %d", cfg.PartSize, cfg.Parallel)}, cmd: upload(fmt.Sprint(cfg.PartSize))},
		{LargeFileWay: LargeFileWay{Name: "upload CLI, one PUT", Command: "upload --part-size -1"}, cmd: upload("-1")},
		{LargeFileWay: LargeFileWay{Name: "aws s3 cp", Command: "aws s3 cp --endpoint-url S3 (multipart_chunksize 8MB, max_concurrent_requests default 10)"}},
	}
	aws := ways[2]
	if cfg.AWS == "" {
		aws.Note = "no AWS CLI found"
	} else {
		var failed error
		for _, kv := range [][2]string{{"default.s3.multipart_chunksize", "8MB"}, {"default.s3.addressing_style", "path"}} {
			setup := exec.CommandContext(ctx, cfg.AWS, "configure", "set", kv[0], kv[1])
			setup.Env = awsEnv
			if msg, err := setup.CombinedOutput(); err != nil && failed == nil {
				failed = fmt.Errorf("aws configure set %s: %v: %s", kv[0], err, bytes.TrimSpace(msg))
			}
		}
		if failed != nil {
			aws.Note = failed.Error()
		} else {
			version, _ := exec.CommandContext(ctx, cfg.AWS, "--version").CombinedOutput()
			aws.Command = strings.TrimSpace(string(version)) + ": " + aws.Command
			aws.cmd = func(run int) *exec.Cmd {
				c := exec.CommandContext(ctx, cfg.AWS, "s3", "cp", "--only-show-errors", "--endpoint-url", cfg.S3URL, file,
					fmt.Sprintf("s3://%s/bench-aws/large-%d.bin", cfg.Bucket, run))
				c.Env = awsEnv
				return c
			}
		}
	}
	for run := range cfg.Runs {
		for _, w := range ways {
			if w.cmd == nil {
				continue
			}
			secs, rss, err := timeProcess(w.cmd(run))
			if err != nil {
				return out, fmt.Errorf("%s: %w", w.Name, err)
			}
			w.Seconds = append(w.Seconds, secs)
			w.PeakRSSKiB = max(w.PeakRSSKiB, rss)
			if cfg.Clean != nil {
				if err := cfg.Clean(ctx); err != nil {
					return out, err
				}
			}
		}
	}
	for _, w := range ways {
		if len(w.Seconds) > 0 {
			s := slices.Clone(w.Seconds)
			slices.Sort(s)
			w.MedianMiBps = float64(cfg.Bytes) / (1 << 20) / s[len(s)/2]
		}
		out.Ways = append(out.Ways, w.LargeFileWay)
	}
	return out, nil
}

// timeProcess runs cmd and returns its wall time and peak RSS.
func timeProcess(cmd *exec.Cmd) (float64, int64, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	secs := time.Since(start).Seconds()
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux
	}
	return secs, rss, nil
}

func writeRandom(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, n); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
