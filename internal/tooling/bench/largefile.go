package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/pkg/client"
)

// LargeFile compares ways of sending one large file to the same local S3:
// the upload CLI in parts, the upload CLI in one PUT, `aws s3 cp`, tusd
// (its S3 store) fed by tus-js-client, and the raw probe (Probe). Each run
// but the probe's is a whole process, from start to exit (hashing included
// for the CLI; the AWS CLI computes MD5s of its parts); the probe runs in
// the benchmark's process.
type LargeFile struct {
	Bytes int64 `json:"bytes"`
	// PartSize and Parallel are the CLI's, in parts.
	PartSize int64 `json:"part_size"`
	Parallel int   `json:"parallel"`
	// Ways holds each way's runs, in the order above; a way that could
	// not run has none and a Note.
	Ways []LargeFileWay `json:"ways"`
	// Phases are where the time goes, measured once in-process with the
	// client library (the CLI's code), in parts and in one PUT.
	Phases       Phases `json:"phases_parts"`
	SinglePhases Phases `json:"phases_one_put"`
}

// Phases of one upload, in seconds: hashing (the pass before the create),
// sending (the first PUT's start to the last one's end) and completing (the
// complete request, or the wait for the S3 event of one PUT).
type Phases struct {
	Hash     float64 `json:"hash"`
	Send     float64 `json:"send"`
	Complete float64 `json:"complete"`
	Total    float64 `json:"total"`
}

// The ways' names, as LargeFileWay.Name.
const (
	WayParts  = "upload CLI, parts"
	WayOnePut = "upload CLI, one PUT"
	WayAWS    = "aws s3 cp"
	WayTusd   = "tusd + tus-js-client"
	WayProbe  = "raw probe"
)

// Way returns the named way, and whether it ran.
func (lf *LargeFile) Way(name string) (LargeFileWay, bool) {
	for _, w := range lf.Ways {
		if w.Name == name {
			return w, len(w.Seconds) > 0
		}
	}
	return LargeFileWay{}, false
}

// LargeFileWay is one way of sending the file, run several times.
type LargeFileWay struct {
	Name string `json:"name"`
	// Seconds are the runs' wall times; MedianMiBps is the size over the
	// median run.
	Seconds     []float64 `json:"seconds"`
	MedianMiBps float64   `json:"median_mib_per_second"`
	// PeakRSSKiB is the largest resident set of the process over the runs:
	// VmHWM from /proc, read every 10 ms while it runs. (The child's
	// ru_maxrss is no use: Go starts children with vfork, and Linux carries
	// the parent's high-water mark into the child at exec.)
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	// CPUSeconds is the process's median user plus system time.
	CPUSeconds float64 `json:"cpu_seconds_median"`
	cpu        []float64
	Command    string `json:"command"`
	Note       string `json:"note,omitempty"`
}

// LargeFileConfig says what to measure.
type LargeFileConfig struct {
	Dir string // for the file, the state files and the AWS config
	// File, if set, is the file to send (the caller writes and removes
	// it); else a file of Bytes random bytes is written in Dir.
	File      string
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
	// Tus, if set, adds tusd fed by tus-js-client.
	Tus *TusWay
	// Probe, if set, adds the raw probe (it writes to Bucket).
	Probe *Probe
	// PartsOnly leaves out the CLI's one PUT, the AWS CLI and the
	// in-process phases: the CLI in parts is what the peers compare with.
	PartsOnly bool
}

// TusWay runs bench/peer/tus-upload.mjs against a running tusd.
type TusWay struct {
	Node, Script string
	Endpoint     string // tusd's, ending in /files/
	Note         string // why it cannot run, if it cannot
	// Clean removes what a run stored in tusd's bucket.
	Clean func(ctx context.Context) error
}

// MeasureLargeFile writes a file of random bytes and sends it each way,
// the ways interleaved run by run so that drift on a shared machine hits
// them alike.
func MeasureLargeFile(ctx context.Context, cfg LargeFileConfig) (LargeFile, error) {
	out := LargeFile{Bytes: cfg.Bytes, PartSize: cfg.PartSize, Parallel: cfg.Parallel}
	file := cfg.File
	if file == "" {
		file = filepath.Join(cfg.Dir, "large.bin")
		if err := WriteRandom(file, cfg.Bytes); err != nil {
			return out, err
		}
		defer os.Remove(file)
	}

	awsConfig := filepath.Join(cfg.Dir, "aws-config")
	awsEnv := append(os.Environ(), "AWS_CONFIG_FILE="+awsConfig, "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_ACCESS_KEY_ID="+services.AccessKey, "AWS_SECRET_ACCESS_KEY="+services.SecretKey, "AWS_DEFAULT_REGION="+services.Region, "AWS_EC2_METADATA_DISABLED=true")
	type way struct {
		LargeFileWay
		cmd func(run int) *exec.Cmd
		// fn runs in this process instead: wall time only.
		fn    func(run int) (float64, error)
		clean func(ctx context.Context) error
	}
	upload := func(partSize string) func(int) *exec.Cmd {
		return func(run int) *exec.Cmd {
			return exec.CommandContext(ctx, cfg.UploadCLI, "--api", cfg.APIURL, "--state", filepath.Join(cfg.Dir, fmt.Sprintf("state-%s-%d.json", partSize, run)),
				"--part-size", partSize, "--parallel", fmt.Sprint(cfg.Parallel), "--quiet", file)
		}
	}
	ways := []*way{
		{LargeFileWay: LargeFileWay{Name: WayParts, Command: fmt.Sprintf("upload --part-size %d --parallel %d", cfg.PartSize, cfg.Parallel)}, cmd: upload(fmt.Sprint(cfg.PartSize))},
		{LargeFileWay: LargeFileWay{Name: WayOnePut, Command: "upload --part-size -1"}, cmd: upload("-1")},
		{LargeFileWay: LargeFileWay{Name: WayAWS, Command: "aws s3 cp --endpoint-url S3 (multipart_chunksize 8MB, max_concurrent_requests default 10)"}},
	}
	aws := ways[2]
	if cfg.AWS == "" {
		aws.Note = "no AWS CLI found (install it, or leave large out of --only)"
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
	if t := cfg.Tus; t != nil {
		w := &way{LargeFileWay: LargeFileWay{Name: WayTusd, Note: t.Note,
			Command: "tusd -s3-bucket B -s3-endpoint S3 (defaults: 50 MiB parts, 10 to S3 at once); node bench/peer/tus-upload.mjs (tus-js-client defaults: one PATCH)"}}
		if t.Note == "" {
			w.cmd = func(run int) *exec.Cmd { return exec.CommandContext(ctx, t.Node, t.Script, t.Endpoint, file) }
			w.clean = t.Clean
		}
		ways = append(ways, w)
	}
	if p := cfg.Probe; p != nil {
		w := &way{LargeFileWay: LargeFileWay{Name: WayProbe,
			Command: fmt.Sprintf("in-process: SDK CreateMultipartUpload, %d presigned part PUTs in flight (SHA-256 signed, hashed beforehand), CompleteMultipartUpload", p.Parallel)}}
		if err := p.Prepare(); err != nil {
			return out, fmt.Errorf("probe: %w", err)
		}
		w.fn = func(run int) (float64, error) { return p.Run(ctx, fmt.Sprintf("bench-probe/large-%d.bin", run)) }
		ways = append(ways, w)
	}
	if cfg.PartsOnly {
		ways[1].cmd, ways[1].Note = nil, "not selected"
		aws.cmd, aws.Note = nil, "not selected"
	}
	for run := range cfg.Runs {
		for _, w := range ways {
			var secs, cpu float64
			var rss int64
			var err error
			switch {
			case w.cmd != nil:
				secs, cpu, rss, err = timeProcess(w.cmd(run))
			case w.fn != nil:
				secs, err = w.fn(run)
			default:
				continue
			}
			if err != nil {
				return out, fmt.Errorf("%s: %w", w.Name, err)
			}
			w.Seconds, w.cpu = append(w.Seconds, secs), append(w.cpu, cpu)
			w.PeakRSSKiB = max(w.PeakRSSKiB, rss)
			for _, clean := range []func(context.Context) error{cfg.Clean, w.clean} {
				if clean != nil {
					if err := clean(ctx); err != nil {
						return out, err
					}
				}
			}
		}
	}
	if !cfg.PartsOnly {
		var err error
		if out.Phases, err = measurePhases(ctx, cfg.APIURL, file, cfg.PartSize, cfg.Parallel); err != nil {
			return out, err
		}
		if out.SinglePhases, err = measurePhases(ctx, cfg.APIURL, file, -1, 1); err != nil {
			return out, err
		}
	}
	for _, w := range ways {
		if len(w.Seconds) > 0 {
			w.MedianMiBps = float64(cfg.Bytes) / (1 << 20) / Median(w.Seconds)
			w.CPUSeconds = Median(w.cpu)
		}
		out.Ways = append(out.Ways, w.LargeFileWay)
	}
	return out, nil
}

// timeProcess runs cmd and returns its wall time, its CPU time (user and
// system) and its peak RSS in KiB.
func timeProcess(cmd *exec.Cmd) (wall, cpu float64, rssKiB int64, err error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var hwm int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			hwm = max(hwm, vmHWM(status))
			select {
			case <-done:
				peak <- hwm
				return
			case <-tick.C:
			}
		}
	}()
	err = cmd.Wait()
	wall = time.Since(start).Seconds()
	close(done)
	rssKiB = <-peak
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return wall, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), rssKiB, nil
}

// vmHWM reads a process's peak resident set (KiB) from its status file; 0
// once it has exited.
func vmHWM(status string) int64 {
	raw, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &kib)
			return kib
		}
	}
	return 0
}

// phaseClock notes when the requests of one upload start and end.
type phaseClock struct {
	next  http.RoundTripper
	start time.Time

	mu                         sync.Mutex
	created, firstPut, lastPut time.Time
	completeStart, completeEnd time.Time
}

func (p *phaseClock) RoundTrip(r *http.Request) (*http.Response, error) {
	t0 := time.Now()
	resp, err := p.next.RoundTrip(r)
	t1 := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/uploads") && p.created.IsZero():
		p.created = t0
	case r.Method == http.MethodPut:
		if p.firstPut.IsZero() {
			p.firstPut = t0
		}
		p.lastPut = t1
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/complete"),
		r.Method == http.MethodGet && !p.lastPut.IsZero():
		if p.completeStart.IsZero() {
			p.completeStart = t0
		}
		p.completeEnd = t1
	}
	return resp, err
}

func measurePhases(ctx context.Context, apiURL, file string, partSize int64, parallel int) (Phases, error) {
	clock := &phaseClock{next: client.NewTransport(), start: time.Now()}
	c, err := client.New(apiURL, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: clock} })
	if err != nil {
		return Phases{}, err
	}
	if _, err := c.Upload(ctx, file, client.UploadInput{PartSize: partSize, Parallel: parallel}); err != nil {
		return Phases{}, fmt.Errorf("phases: %w", err)
	}
	end := time.Now()
	clock.mu.Lock()
	defer clock.mu.Unlock()
	complete := clock.completeEnd.Sub(clock.completeStart).Seconds()
	if clock.completeStart.IsZero() {
		complete = 0 // completed before the first status
	}
	return Phases{
		Hash: clock.created.Sub(clock.start).Seconds(), Send: clock.lastPut.Sub(clock.firstPut).Seconds(),
		Complete: complete, Total: end.Sub(clock.start).Seconds(),
	}, nil
}
