package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// FirstPart is the time from the start of an upload to its first part
// stored, as S3 shows it (ListParts), for one large file: through the
// upload CLI and through the demo page in Chromium. Each upload is stopped
// and its multipart upload aborted once that part is seen.
type FirstPart struct {
	Bytes    int64        `json:"bytes"`
	CLI      FirstPartRun `json:"cli"`
	Chromium FirstPartRun `json:"chromium"`
}

// FirstPartRun is one way's measurement: Seconds from the start (the CLI's
// process start; the page's change event on its file input) until the poll
// of S3 first listed a part, the median of Runs. Note says why it is
// missing (and then no seconds are written: a run not made is no zero).
type FirstPartRun struct {
	Seconds float64   `json:"seconds,omitempty"`
	Runs    []float64 `json:"runs"`
	// PollMs is the poll's interval: the first part was stored at most
	// this long (plus one ListParts round trip) before it was seen.
	PollMs int    `json:"poll_ms"`
	Note   string `json:"note,omitempty"`
}

// BrowserUpload is the uploads of a whole file by the demo page in
// Chromium, each from the pick (the input's change event) to the row shown
// completed (the API's recorded completion): Seconds and MiBps are the
// medians of Runs. Note says why it is missing, with no time or rate.
type BrowserUpload struct {
	Bytes   int64     `json:"bytes"`
	Runs    []float64 `json:"runs,omitempty"`
	Seconds float64   `json:"seconds,omitempty"`
	MiBps   float64   `json:"mib_per_second,omitempty"`
	// LongestTaskMs is the page's longest main-thread task while an upload
	// ran, over all runs, and LongTasks the most tasks over 50 ms in one
	// run (PerformanceObserver "longtask" entries, each over 50 ms): absent
	// when there were none.
	LongestTaskMs float64 `json:"longest_task_ms,omitempty"`
	LongTasks     int     `json:"long_tasks,omitempty"`
	// LongTaskRuns is each run's count of main-thread tasks over 50 ms.
	LongTaskRuns []int `json:"long_task_runs,omitempty"`
	// Parts and MaxInFlight are what the driver saw the page send (part
	// PUTs, and the most at once: its events lag the page's, so one more
	// than ran at once may show) in the last run: what the raw probe copies.
	Parts       int `json:"parts,omitempty"`
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// CPU is the browser's CPU seconds from the pick to the row shown
	// completed, by process (and the renderer's threads), the median of
	// the runs for each.
	CPU map[string]float64 `json:"cpu_seconds,omitempty"`
	// CPURuns is each run's CPU seconds over all of the browser's
	// processes: their median is the way's figure (CPU's medians, taken
	// key by key, need not add up to any run's).
	CPURuns []float64 `json:"cpu_seconds_runs,omitempty"`
	Note    string    `json:"note,omitempty"`
}

// firstPartPoll is how often S3 is asked whether a part is stored.
const firstPartPoll = 10 * time.Millisecond

// WaitFirstPart polls the bucket until one of its multipart uploads, not
// one of those listed in before, holds a part, and returns the moment it
// saw it. Versity Gateway lists a part only once it is whole and its
// checksum checked: it writes each part to a temporary file and links it
// into place at the end.
func WaitFirstPart(ctx context.Context, s3c *s3.Client, bucket string, before map[string]bool) (time.Time, error) {
	for {
		ups, err := s3c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		if err != nil {
			return time.Time{}, fmt.Errorf("list multipart uploads: %w", err)
		}
		for _, u := range ups.Uploads {
			if before[aws.ToString(u.UploadId)] {
				continue
			}
			parts, err := s3c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId, MaxParts: aws.Int32(1)})
			if err == nil && len(parts.Parts) > 0 {
				return time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(firstPartPoll):
		}
	}
}

// multipartUploads are the ids of the bucket's unfinished multipart
// uploads.
func multipartUploads(ctx context.Context, s3c *s3.Client, bucket string) (map[string]bool, error) {
	ups, err := s3c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, u := range ups.Uploads {
		ids[aws.ToString(u.UploadId)] = true
	}
	return ids, nil
}

// stopped waits a moment after an uploader is stopped, for the part PUTs
// it had in flight to end, then aborts every multipart upload in the
// bucket. (A part that S3 finishes receiving after an abort can bring its
// upload back in Versity Gateway's listing; the next run ignores the
// uploads that were there before it started.)
func stopped(ctx context.Context, s3c *s3.Client, bucket string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(500 * time.Millisecond):
	}
	return AbortMultipartUploads(ctx, s3c, bucket)
}

// AbortMultipartUploads aborts every unfinished multipart upload in the
// bucket.
func AbortMultipartUploads(ctx context.Context, s3c *s3.Client, bucket string) error {
	ups, err := s3c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		return err
	}
	for _, u := range ups.Uploads {
		if _, err := s3c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId}); err != nil {
			return err
		}
	}
	return nil
}

// FirstPartConfig says what to measure.
type FirstPartConfig struct {
	Dir       string // for the CLI's state file
	File      string // the file, written by the caller
	Bytes     int64
	APIURL    string
	UploadCLI string
	S3        *s3.Client
	Bucket    string // the stack's
	// Browser, if not nil, drives the demo page (else Chromium is not run).
	Browser *BrowserDriver
	// Runs is how many times each way is timed; Chromium stops after a
	// run over 20 s (a whole-file pass before the first part).
	Runs int
}

// BrowserDriver runs bench/browser/upload.mjs.
type BrowserDriver struct {
	Node, Script string
	AppURL       string // the stack's front door, which serves web/dist
	Chromium     string
	LogPath      string
	// TraceDir, if set, gets a Chromium trace of each run (the driver's
	// TRACE_PATH): <mode>-<n>.json.
	TraceDir string
	traces   int
}

// MeasureFirstPart measures the CLI, then Chromium.
func MeasureFirstPart(ctx context.Context, cfg FirstPartConfig) (FirstPart, error) {
	out := FirstPart{Bytes: cfg.Bytes}
	if err := AbortMultipartUploads(ctx, cfg.S3, cfg.Bucket); err != nil {
		return out, err
	}
	for i := range max(cfg.Runs, 1) {
		run, err := firstPartCLI(ctx, cfg, i)
		if err != nil {
			// Reported, as the other sections' results are.
			out.CLI = FirstPartRun{Note: err.Error()}
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			break
		}
		out.CLI.Runs = append(out.CLI.Runs, run.Seconds)
		out.CLI.PollMs = run.PollMs
	}
	out.CLI.Seconds = Median(out.CLI.Runs)
	if err := AbortMultipartUploads(ctx, cfg.S3, cfg.Bucket); err != nil {
		return out, err
	}
	if cfg.Browser == nil {
		out.Chromium.Note = "Chromium not run"
		return out, nil
	}
	for range max(cfg.Runs, 1) {
		run, err := firstPartBrowser(ctx, cfg)
		if err == nil {
			err = stopped(ctx, cfg.S3, cfg.Bucket)
		}
		if err != nil {
			out.Chromium = FirstPartRun{Note: err.Error()}
			return out, ctx.Err()
		}
		out.Chromium.Runs = append(out.Chromium.Runs, run.Seconds)
		out.Chromium.PollMs = run.PollMs
		if run.Seconds > 20 {
			break
		}
	}
	out.Chromium.Seconds = Median(out.Chromium.Runs)
	return out, nil
}

func firstPartCLI(ctx context.Context, cfg FirstPartConfig, run int) (FirstPartRun, error) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// A state file of its own: with the last run's, the CLI would resume
	// that (aborted) upload.
	state := filepath.Join(cfg.Dir, fmt.Sprintf("state-first-part-%d.json", run))
	cmd := exec.CommandContext(wctx, cfg.UploadCLI, "--api", cfg.APIURL, "--state", state, "--quiet", cfg.File)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	before, err := multipartUploads(ctx, cfg.S3, cfg.Bucket)
	if err != nil {
		return FirstPartRun{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return FirstPartRun{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	seen, err := waitFirstPartOrExit(wctx, cfg, before, exited)
	_ = cmd.Process.Kill() // an error when it has exited already
	<-exited
	if err != nil {
		return FirstPartRun{}, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := stopped(ctx, cfg.S3, cfg.Bucket); err != nil {
		return FirstPartRun{}, err
	}
	return FirstPartRun{Seconds: seen.Sub(start).Seconds(), PollMs: int(firstPartPoll.Milliseconds())}, nil
}

// waitFirstPartOrExit waits for the first stored part, or fails when the
// uploader ends first. What it receives from exited it sends back.
func waitFirstPartOrExit(ctx context.Context, cfg FirstPartConfig, before map[string]bool, exited chan error) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type seen struct {
		t   time.Time
		err error
	}
	got := make(chan seen, 1)
	go func() {
		t, err := WaitFirstPart(ctx, cfg.S3, cfg.Bucket, before)
		got <- seen{t, err}
	}()
	select {
	case s := <-got:
		return s.t, s.err
	case err := <-exited:
		exited <- err
		cancel()
		<-got
		return time.Time{}, fmt.Errorf("the uploader ended before a part was stored (%v)", err)
	}
}

// browserEvent is a line of bench/browser/upload.mjs.
type browserEvent struct {
	Event   string  `json:"event"`
	EpochMs float64 `json:"epochMs"`
	// "completed" and "probed": the main thread's long tasks meanwhile.
	LongestTaskMs float64 `json:"longestTaskMs"`
	LongTasks     int     `json:"longTasks"`
	// "completed": the part PUTs seen, and the most in flight at once.
	PartPuts    int `json:"partPuts"`
	MaxInFlight int `json:"maxInFlight"`
	// "probed": the first PUT sent, the last PUT answered.
	StartMs    float64 `json:"startMs"`
	PutsDoneMs float64 `json:"putsDoneMs"`
}

// browserRun is a running bench/browser/upload.mjs.
type browserRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan browserEvent
	exited chan error
	log    *os.File
}

func (d *BrowserDriver) start(ctx context.Context, file, mode string, env ...string) (*browserRun, error) {
	cmd := exec.CommandContext(ctx, d.Node, d.Script)
	cmd.Env = append(os.Environ(), "APP_URL="+d.AppURL, "FILE_PATH="+file, "MODE="+mode, "CHROMIUM="+d.Chromium)
	cmd.Env = append(cmd.Env, env...)
	if d.TraceDir != "" {
		d.traces++
		cmd.Env = append(cmd.Env, "TRACE_PATH="+filepath.Join(d.TraceDir, fmt.Sprintf("%s-%d.json", mode, d.traces)))
	}
	// Its own process group, so that a kill also ends the browser it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	r := &browserRun{cmd: cmd, events: make(chan browserEvent, 4), exited: make(chan error, 1)}
	var err error
	if r.log, err = os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	cmd.Stderr = r.log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		r.log.Close()
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e browserEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Event != "" {
				r.events <- e
			}
		}
		close(r.events)
		r.exited <- cmd.Wait()
		r.log.Close()
	}()
	return r, nil
}

// next waits for the named event and returns its time.
func (r *browserRun) next(ctx context.Context, name string) (time.Time, error) {
	e, err := r.event(ctx, name)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(int64(e.EpochMs * 1000)), nil
}

// event waits for the named event.
func (r *browserRun) event(ctx context.Context, name string) (browserEvent, error) {
	for {
		select {
		case e, ok := <-r.events:
			if !ok {
				// The log goes with the benchmark's temporary directory: its end, here.
				return browserEvent{}, fmt.Errorf("the browser driver ended before %q; the end of its log:\n%s", name, logTail(r.log.Name(), 2000))
			}
			if e.Event == name {
				return e, nil
			}
		case <-ctx.Done():
			return browserEvent{}, ctx.Err()
		}
	}
}

// stop asks the driver to close the browser, and kills it after 20 s.
func (r *browserRun) stop() error {
	_, _ = io.WriteString(r.stdin, "stop\n")
	_ = r.stdin.Close()
	select {
	case err := <-r.exited:
		return err
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		return errors.Join(errors.New("the browser driver did not stop; killed"), <-r.exited)
	}
}

func firstPartBrowser(ctx context.Context, cfg FirstPartConfig) (FirstPartRun, error) {
	wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	before, err := multipartUploads(ctx, cfg.S3, cfg.Bucket)
	if err != nil {
		return FirstPartRun{}, err
	}
	r, err := cfg.Browser.start(wctx, cfg.File, "first-part")
	if err != nil {
		return FirstPartRun{}, err
	}
	defer func() { _ = r.stop() }()
	// The driver ends (non-zero) if the page shows the upload failed.
	seen, err := waitFirstPartOrExit(wctx, cfg, before, r.exited)
	if err != nil {
		return FirstPartRun{}, fmt.Errorf("%w (the browser driver's log: %s)", err, r.log.Name())
	}
	picked, err := r.next(wctx, "picked")
	if err != nil {
		return FirstPartRun{}, err
	}
	return FirstPartRun{Seconds: seen.Sub(picked).Seconds(), PollMs: int(firstPartPoll.Milliseconds())}, nil
}

// BrowserConfig says what MeasureBrowser measures.
type BrowserConfig struct {
	Driver *BrowserDriver
	APIURL string
	File   string
	Bytes  int64
	// Runs of each: the client and the raw probe take turns, so that both
	// see the same machine (others share its cores).
	Runs int
	// Clean empties the bucket after each run.
	Clean func(context.Context) error
}

// MeasureBrowser uploads the file through the demo page and through the
// raw probe, Runs times each, in turns. A failure of one stops both, with
// what was measured so far.
func MeasureBrowser(ctx context.Context, cfg BrowserConfig) (BrowserUpload, BrowserProbe, error) {
	up := BrowserUpload{Bytes: cfg.Bytes}
	partSize := WebPartSize(cfg.Bytes)
	pr := BrowserProbe{Bytes: cfg.Bytes, PartBytes: partSize, Parallel: webParallel}
	sums, err := partSums(cfg.File, cfg.Bytes, partSize)
	if err != nil {
		return up, pr, err
	}
	var puts []float64
	var upCPU, probeCPU []cpuShares
	for i := range max(cfg.Runs, 1) {
		run, err := uploadInBrowser(ctx, cfg.Driver, cfg.File, cfg.Bytes)
		if err == nil {
			err = cfg.Clean(ctx)
		}
		if err != nil {
			return up, pr, fmt.Errorf("demo page: %w", err)
		}
		up.Runs = append(up.Runs, run.Seconds)
		up.LongestTaskMs, up.LongTasks = max(up.LongestTaskMs, run.LongestTaskMs), max(up.LongTasks, run.LongTasks)
		up.LongTaskRuns = append(up.LongTaskRuns, run.LongTasks)
		up.Parts, up.MaxInFlight = run.Parts, run.MaxInFlight
		upCPU = append(upCPU, run.CPU)
		p, err := runProbe(ctx, cfg.Driver, cfg.APIURL, cfg.File, cfg.Bytes, partSize, sums, i)
		if err == nil {
			err = cfg.Clean(ctx)
		}
		if err != nil {
			return up, pr, fmt.Errorf("raw probe: %w", err)
		}
		pr.Runs, puts = append(pr.Runs, p.seconds), append(puts, p.puts)
		pr.LongestTaskMs = max(pr.LongestTaskMs, p.longestTaskMs)
		pr.LongTaskRuns = append(pr.LongTaskRuns, p.longTasks)
		probeCPU = append(probeCPU, p.cpu)
	}
	up.CPU, pr.CPU = medianShares(upCPU), medianShares(probeCPU)
	up.CPURuns, pr.CPURuns = totals(upCPU), totals(probeCPU)
	up.Seconds, pr.Seconds, pr.PutSeconds = Median(up.Runs), Median(pr.Runs), Median(puts)
	up.MiBps = float64(cfg.Bytes) / (1 << 20) / up.Seconds
	pr.MiBps = float64(cfg.Bytes) / (1 << 20) / pr.Seconds
	return up, pr, nil
}

// uploadInBrowser uploads file whole through the demo page once.
func uploadInBrowser(ctx context.Context, d *BrowserDriver, file string, bytes int64) (BrowserUpload, error) {
	out := BrowserUpload{Bytes: bytes}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	r, err := d.start(wctx, file, "complete")
	if err != nil {
		return out, err
	}
	picked, err := r.next(wctx, "picked")
	if err != nil {
		_ = r.stop()
		return out, err
	}
	cpu := treeCPU(r.cmd.Process.Pid)
	done, err := r.event(wctx, "completed")
	if err != nil {
		_ = r.stop()
		return out, err
	}
	out.CPU = treeCPU(r.cmd.Process.Pid).minus(cpu)
	if err := r.stop(); err != nil {
		return out, err
	}
	out.Seconds = time.UnixMicro(int64(done.EpochMs * 1000)).Sub(picked).Seconds()
	out.MiBps = float64(bytes) / (1 << 20) / out.Seconds
	out.LongestTaskMs, out.LongTasks = done.LongestTaskMs, done.LongTasks
	out.Parts, out.MaxInFlight = done.PartPuts, done.MaxInFlight
	return out, nil
}

// logTail is the last n bytes of the file at path (all of it if shorter).
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-n):])
}
