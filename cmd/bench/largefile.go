package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/bench"
	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/pkg/client"
)

// largeFile is the large-file sections' flags and their files.
var largeFile struct {
	size      int64
	runs      int
	firstPart int64
	// file is the --large-file file once written (sections share it).
	file string
}

// largeFilePath writes the --large-file file once; run removes dir, and
// it with it.
func largeFilePath(dir string) (string, error) {
	if largeFile.file == "" {
		path := filepath.Join(dir, "large.bin")
		if err := bench.WriteRandom(path, largeFile.size); err != nil {
			return "", err
		}
		largeFile.file = path
	}
	return largeFile.file, nil
}

// uploadCLI builds cmd/upload into dir once.
func uploadCLI(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "upload")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/upload").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the upload CLI: %v\n%s", err, out)
	}
	return bin, nil
}

// s3Client is a client of the stack's S3, with the local services' keys.
func s3Client(st *devstack.Stack) *s3.Client {
	return s3.NewFromConfig(services.AWSConfig(), func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(st.S3URL), true })
}

// emptyBucket deletes the bucket's objects and aborts its multipart uploads.
func emptyBucket(ctx context.Context, s3c *s3.Client, bucket string) error {
	var token *string
	for {
		list, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, ContinuationToken: token})
		if err != nil {
			return err
		}
		for _, o := range list.Contents {
			if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key}); err != nil {
				return err
			}
		}
		if !aws.ToBool(list.IsTruncated) {
			break
		}
		token = list.NextContinuationToken
	}
	return bench.AbortMultipartUploads(ctx, s3c, bucket)
}

// measureLargeFile builds the upload CLI and compares it, in parts, with
// the selected others: in one PUT and the AWS CLI (large), tusd (tusd),
// the raw probe (probe).
func measureLargeFile(ctx context.Context, rep *report, st *devstack.Stack, dir string) (bench.LargeFile, error) {
	bin, err := uploadCLI(ctx, dir)
	if err != nil {
		return bench.LargeFile{}, err
	}
	file, err := largeFilePath(dir)
	if err != nil {
		return bench.LargeFile{}, err
	}
	awsCLI, _ := exec.LookPath("aws")
	if awsCLI == "" {
		if _, err := os.Stat("/usr/bin/aws"); err == nil {
			awsCLI = "/usr/bin/aws"
		}
	}
	s3c := s3Client(st)
	clean := func(ctx context.Context) error { return emptyBucket(ctx, s3c, st.Bucket) }
	cfg := bench.LargeFileConfig{
		Dir: dir, File: file, Bytes: largeFile.size, Runs: largeFile.runs, APIURL: st.APIURL, S3URL: st.S3URL, Bucket: st.Bucket,
		UploadCLI: bin, AWS: awsCLI, PartSize: client.PartSizeFor(max(largeFile.size, client.MultipartThreshold)), Parallel: client.DefaultParallel, Clean: clean,
		PartsOnly: !rep.ran("large"),
	}
	if rep.ran("tusd") {
		tus, stop, err := startTusd(ctx, st, s3c, dir)
		if err != nil {
			tus = &bench.TusWay{Note: err.Error()}
		} else {
			defer stop()
		}
		cfg.Tus = tus
	}
	if rep.ran("probe") {
		cfg.Probe = &bench.Probe{S3: s3c, Bucket: st.Bucket, File: file, PartSize: cfg.PartSize, Parallel: cfg.Parallel}
	}
	return bench.MeasureLargeFile(ctx, cfg)
}

// tusBucket is where tusd's S3 store keeps its uploads, on the stack's S3.
const tusBucket = "tus-bench"

// startTusd starts tusd on the stack's S3 and says how to feed it with
// tus-js-client (bench/peer, installed by make bench).
func startTusd(ctx context.Context, st *devstack.Stack, s3c *s3.Client, dir string) (*bench.TusWay, func(), error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, errors.New("node is not on PATH")
	}
	if _, err := os.Stat("bench/peer/node_modules/tus-js-client"); err != nil {
		return nil, nil, errors.New("bench/peer/node_modules/tus-js-client missing (make bench runs npm ci there)")
	}
	script, err := filepath.Abs("bench/peer/tus-upload.mjs")
	if err != nil {
		return nil, nil, err
	}
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(tusBucket)}); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s: %w", tusBucket, err)
	}
	tmp := filepath.Join(dir, "tusd-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, nil, err
	}
	proc, err := services.StartTusd(ctx, services.TusdOptions{
		Options: services.Options{LogPath: filepath.Join(dir, "tusd.log")}, S3URL: st.S3URL, Bucket: tusBucket, TempDir: tmp,
	})
	if err != nil {
		return nil, nil, err
	}
	return &bench.TusWay{
		Node: node, Script: script, Endpoint: proc.Endpoint + "/files/",
		Clean: func(ctx context.Context) error { return emptyBucket(ctx, s3c, tusBucket) },
	}, func() { _ = proc.Stop() }, nil
}

// browserDriver is bench/browser/upload.mjs on the stack's demo page, or
// why it cannot run.
func browserDriver(st *devstack.Stack, dir string) (*bench.BrowserDriver, error) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		return nil, errors.New(chromium + " is missing (scripts/install-tools.sh installs it)")
	}
	for _, f := range []string{"web/dist/index.html", "web/node_modules/playwright-core/package.json"} {
		if _, err := os.Stat(f); err != nil {
			return nil, errors.New(f + " is missing (make bench builds it: make web-build)")
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not on PATH")
	}
	script, err := filepath.Abs("bench/browser/upload.mjs")
	if err != nil {
		return nil, err
	}
	// BENCH_BROWSER_TRACE=dir keeps a Chromium trace of each browser run there (large: tens of MB each).
	return &bench.BrowserDriver{Node: node, Script: script, AppURL: st.APIURL, Chromium: chromium, LogPath: filepath.Join(dir, "chromium.log"), TraceDir: os.Getenv("BENCH_BROWSER_TRACE")}, nil
}

// measureBrowser uploads the --large-file file through the demo page and
// through the raw browser probe, --large-file-runs times each in turns.
func measureBrowser(ctx context.Context, rep *report, st *devstack.Stack, dir string) error {
	d, err := browserDriver(st, dir)
	if err != nil {
		rep.Browser = &bench.BrowserUpload{Bytes: largeFile.size, Note: err.Error()}
		rep.BrowserProbe = &bench.BrowserProbe{Bytes: largeFile.size, Note: err.Error()}
		return nil
	}
	file, err := largeFilePath(dir)
	if err != nil {
		return err
	}
	s3c := s3Client(st)
	clean := func(ctx context.Context) error { return emptyBucket(ctx, s3c, st.Bucket) }
	up, probe, err := bench.MeasureBrowser(ctx, bench.BrowserConfig{Driver: d, APIURL: st.APIURL, File: file, Bytes: largeFile.size, Runs: largeFile.runs, Clean: clean})
	if err != nil {
		up.Note, probe.Note = err.Error(), err.Error()
	}
	rep.Browser, rep.BrowserProbe = &up, &probe
	return clean(ctx)
}

// freeBytes is the space left for an unprivileged writer under dir, or -1
// when it cannot be read.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// measureFirstPart writes the --first-part-file file, times the first
// part stored through the CLI and, when browser is selected too,
// Chromium, and removes it.
func measureFirstPart(ctx context.Context, rep *report, st *devstack.Stack, dir string) error {
	bin, err := uploadCLI(ctx, dir)
	if err != nil {
		return err
	}
	// The file, and room for the parts S3 stores before each upload stops.
	if free := freeBytes(dir); free >= 0 && free < largeFile.firstPart+1<<30 {
		note := fmt.Sprintf("%.1f GiB free in %s, %.1f GiB needed", float64(free)/(1<<30), dir, float64(largeFile.firstPart+1<<30)/(1<<30))
		rep.FirstPart = &bench.FirstPart{Bytes: largeFile.firstPart, CLI: bench.FirstPartRun{Note: note}, Chromium: bench.FirstPartRun{Note: note}}
		return nil
	}
	file := filepath.Join(dir, "first-part.bin")
	t0 := time.Now()
	defer os.Remove(file)
	if err := bench.WriteRandom(file, largeFile.firstPart); err != nil {
		rep.FirstPart = &bench.FirstPart{Bytes: largeFile.firstPart, CLI: bench.FirstPartRun{Note: err.Error()}, Chromium: bench.FirstPartRun{Note: err.Error()}}
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %d MiB in %.1f s\n", largeFile.firstPart>>20, time.Since(t0).Seconds())
	cfg := bench.FirstPartConfig{Dir: dir, File: file, Bytes: largeFile.firstPart, APIURL: st.APIURL, UploadCLI: bin, S3: s3Client(st), Bucket: st.Bucket, Runs: largeFile.runs}
	d, derr := browserDriver(st, dir)
	if !rep.ran("browser") {
		d, derr = nil, errors.New("not selected (--only without browser)")
	}
	if derr == nil {
		cfg.Browser = d
	}
	fp, err := bench.MeasureFirstPart(ctx, cfg)
	if err != nil {
		return err
	}
	if derr != nil {
		fp.Chromium.Note = derr.Error()
	}
	rep.FirstPart = &fp
	return nil
}

// printLargeFile renders the large-file section and its targets.
func printLargeFile(w io.Writer, lf *bench.LargeFile) {
	if lf == nil {
		return
	}
	fmt.Fprintf(w, "\n## Large file: %d MiB to the same local S3 (whole processes but the probe, medians of %d runs)\n\n", lf.Bytes>>20, runsOf(lf))
	fmt.Fprintf(w, "| way | runs (s) | median MiB/s | CPU (s, median) | peak RSS | command |\n|---|---|---|---|---|---|\n")
	for _, way := range lf.Ways {
		if len(way.Seconds) == 0 {
			if way.Note != "not selected" {
				fmt.Fprintf(w, "| %s | not run: %s | | | | |\n", way.Name, way.Note)
			}
			continue
		}
		runs := ""
		for i, s := range way.Seconds {
			if i > 0 {
				runs += ", "
			}
			runs += fmt.Sprintf("%.2f", s)
		}
		cpu, rss := fmt.Sprintf("%.2f", way.CPUSeconds), fmt.Sprintf("%.1f MiB", float64(way.PeakRSSKiB)/1024)
		if way.Name == bench.WayProbe {
			cpu, rss = "— (in-process)", "—"
		} else if way.Name == bench.WayTusd {
			cpu, rss = cpu+" (client only)", rss+" (client only)"
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | `%s` |\n", way.Name, runs, way.MedianMiBps, cpu, rss, way.Command)
	}
	parts, ok := lf.Way(bench.WayParts)
	if !ok {
		return
	}
	fmt.Fprintf(w, "\n| target | measured | verdict |\n|---|---|---|\n")
	if single, ok := lf.Way(bench.WayOnePut); ok {
		r := parts.MedianMiBps / single.MedianMiBps
		fmt.Fprintf(w, "| parts (%d in flight) ≥ 1.5× one PUT | %.2f× | %s |\n", lf.Parallel, r, verdict(r >= 1.5))
	}
	if awsCp, ok := lf.Way(bench.WayAWS); ok {
		r := parts.MedianMiBps / awsCp.MedianMiBps
		fmt.Fprintf(w, "| parts ≥ 1× aws s3 cp | %.2f× | %s |\n", r, verdict(r >= 1))
	}
	if tus, ok := lf.Way(bench.WayTusd); ok {
		r := parts.MedianMiBps / tus.MedianMiBps
		fmt.Fprintf(w, "| CLI in parts ≥ 1.5× tusd + tus-js-client (MiB/s: %.0f vs %.0f) | %.2f× | %s |\n", parts.MedianMiBps, tus.MedianMiBps, r, verdict(r >= 1.5))
	}
	if probe, ok := lf.Way(bench.WayProbe); ok {
		r := parts.MedianMiBps / probe.MedianMiBps
		fmt.Fprintf(w, "| CLI in parts ≥ 0.8× the raw probe (MiB/s: %.0f vs %.0f) | %.2f× | %s |\n", parts.MedianMiBps, probe.MedianMiBps, r, verdict(r >= 0.8))
	}
	fmt.Fprintf(w, "| CLI peak RSS < 64 MiB (VmHWM, largest of the runs) | %.1f MiB | %s |\n", float64(parts.PeakRSSKiB)/1024, verdict(parts.PeakRSSKiB < 64<<10))
	if _, ok := lf.Way(bench.WayTusd); ok {
		fmt.Fprintf(w, "\n%s\n", tusdHow)
	}
	if _, ok := lf.Way(bench.WayProbe); ok {
		fmt.Fprintf(w, "\n%s\n", probeHow)
	}
	if lf.Phases.Total == 0 {
		return
	}
	p, o := lf.Phases, lf.SinglePhases
	fmt.Fprintf(w, "\nWhere the time goes (one in-process run of the client library each, seconds):\n\n")
	fmt.Fprintf(w, "| phase | parts | one PUT |\n|---|---|---|\n")
	fmt.Fprintf(w, "| hash before the create | %.2f | %.2f |\n| send | %.2f | %.2f |\n| complete (parts) or wait for the event (one PUT) | %.2f | %.2f |\n| total | %.2f | %.2f |\n",
		p.Hash, o.Hash, p.Send, o.Send, p.Complete, o.Complete, p.Total, o.Total)
	fmt.Fprintf(w, "\n%s\n", largeFileWhy)
}

const tusdHow = `tusd: the tus reference server (tools/go.mod), its S3 store on the same
Versity Gateway, default settings (50 MiB parts buffered on disk, 10 sent
to S3 at once); tus-js-client (bench/peer) sends the file as one PATCH,
its default. Timed: the client process from start to exit, after tusd
answered the last PATCH, which it does once CompleteMultipartUpload is done.`

const probeHow = `Raw probe: the floor of an upload in parts here, no API. Parts hashed
before the clock starts; timed from CreateMultipartUpload (SHA-256
checksums) to CompleteMultipartUpload, the parts PUT through URLs
presigned with their SHA-256 by the product's own presigner, as many in
flight and of the same size as the CLI's.`

// printIssue24 renders the time to the first stored part and the upload
// in Chromium.
func printIssue24(w io.Writer, rep report) {
	if fp := rep.FirstPart; fp != nil {
		fmt.Fprintf(w, "\n## First part stored: a %d MiB file (medians; Chromium stops after a run over 20 s)\n\n", fp.Bytes>>20)
		if poll := max(fp.CLI.PollMs, fp.Chromium.PollMs); poll > 0 {
			fmt.Fprintf(w, "From the start of the upload (the CLI's process start; the page's change event on its file input) to the first part S3 lists (ListParts, polled every %d ms): observed at S3, not reported by the client. The upload is then stopped and aborted.\n\n", poll)
		}
		fmt.Fprintf(w, "| way | first part stored after | runs (s) | target ≤ 1 s |\n|---|---|---|---|\n")
		for _, r := range []struct {
			name string
			run  bench.FirstPartRun
		}{{"upload CLI (defaults)", fp.CLI}, {"demo page in Chromium (headless)", fp.Chromium}} {
			if r.run.Note != "" {
				fmt.Fprintf(w, "| %s | not run: %s | | |\n", r.name, r.run.Note)
				continue
			}
			runs := make([]string, len(r.run.Runs))
			for i, s := range r.run.Runs {
				runs[i] = fmt.Sprintf("%.2f", s)
			}
			fmt.Fprintf(w, "| %s | %.2f s | %s | %s |\n", r.name, r.run.Seconds, strings.Join(runs, ", "), verdict(r.run.Seconds <= 1))
		}
	}
	if b := rep.Browser; b != nil {
		printBrowser(w, b, rep.BrowserProbe, rep.LargeFile)
	}
}

// printBrowser renders the demo page's uploads beside the raw browser
// probe's and the CLI's, and the browser targets.
func printBrowser(w io.Writer, b *bench.BrowserUpload, probe *bench.BrowserProbe, lf *bench.LargeFile) {
	fmt.Fprintf(w, "\n## A %d MiB file through the demo page in Chromium (headless, medians of %d runs, client and probe in turns)\n\n", b.Bytes>>20, len(b.Runs))
	if b.Note != "" {
		fmt.Fprintf(w, "Not run: %s\n", b.Note)
		return
	}
	runs := func(rs []float64) string {
		out := make([]string, len(rs))
		for i, s := range rs {
			out[i] = fmt.Sprintf("%.2f", s)
		}
		return strings.Join(out, ", ")
	}
	fmt.Fprintf(w, "| way | runs (s) | median MiB/s | longest main-thread task | what |\n|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| demo page (the browser client) | %s | %.0f | %.0f ms | pick to the row shown completed: %d part PUTs seen, at most %d in flight |\n",
		runs(b.Runs), b.MiBps, b.LongestTaskMs, b.Parts, b.MaxInFlight)
	if probe != nil && probe.Note == "" {
		fmt.Fprintf(w, "| raw browser probe | %s | %.0f | %.0f ms | first PUT to the complete answered (the PUTs alone: %.2f s); %d MiB parts, %d in flight, no hashing |\n",
			runs(probe.Runs), probe.MiBps, probe.LongestTaskMs, probe.PutSeconds, probe.PartBytes>>20, probe.Parallel)
	}
	var parts bench.LargeFileWay
	if lf != nil && lf.Bytes == b.Bytes {
		parts, _ = lf.Way(bench.WayParts)
	}
	if len(parts.Seconds) > 0 {
		fmt.Fprintf(w, "| upload CLI in parts (large-file section above) | %s | %.0f | — | its process start to exit |\n", runs(parts.Seconds), parts.MedianMiBps)
	} else {
		fmt.Fprintf(w, "| upload CLI in parts | not run: select large or probe with browser (--only probe,browser) | | | |\n")
	}
	fmt.Fprintf(w, "\n| target | measured | verdict |\n|---|---|---|\n")
	if probe != nil && probe.Note == "" {
		r := b.MiBps / probe.MiBps
		fmt.Fprintf(w, "| browser client ≥ 0.8× the raw browser probe (MiB/s: %.0f vs %.0f) | %.2f× | %s |\n", b.MiBps, probe.MiBps, r, verdict(r >= 0.8))
	}
	fmt.Fprintf(w, "| no main-thread task over 50 ms while the client uploads (%d such tasks in the worst run) | %.0f ms | %s |\n", b.LongTasks, b.LongestTaskMs, verdict(b.LongestTaskMs <= 50))
	if probe != nil && probe.Note == "" && len(b.LongTaskRuns) > 0 && len(probe.LongTaskRuns) > 0 {
		// Counted, not judged: the probe's are the browser's own.
		fmt.Fprintf(w, "| main-thread tasks over 50 ms, median of the runs: the client's against the probe's (runs %v vs %v) | %d vs %d | — |\n",
			b.LongTaskRuns, probe.LongTaskRuns, bench.Median(b.LongTaskRuns), bench.Median(probe.LongTaskRuns))
	}
	if probe != nil && probe.Note == "" && len(b.CPU) > 0 {
		tc, tp := cpuOf(b.CPURuns, b.CPU), cpuOf(probe.CPURuns, probe.CPU)
		if tp > 0 {
			gib := float64(b.Bytes) / (1 << 30)
			fmt.Fprintf(w, "| browser's CPU per GiB over all its processes ≤ 1.5× the probe's (%.1f s vs %.1f s) | %.2f× | %s |\n", tc/gib, tp/gib, tc/tp, verdict(tc/tp <= 1.5))
		}
		printBrowserCPU(w, b.CPU, probe.CPU)
	}
	fmt.Fprintf(w, "\n%s\n", browserProbeHow)
}

// cpuOf is a way's CPU seconds: the median of its runs' totals, or (a
// report without them) the sum of its shares.
func cpuOf(runs []float64, shares map[string]float64) float64 {
	if len(runs) > 0 {
		return bench.Median(runs)
	}
	return cpuTotal(shares)
}

// cpuTotal is the CPU seconds of every process and thread counted.
func cpuTotal(shares map[string]float64) float64 {
	var t float64
	for _, v := range shares {
		t += v
	}
	return t
}

// printBrowserCPU renders where the browser spent CPU, the client beside
// the probe: the difference is the client's own cost.
func printBrowserCPU(w io.Writer, client, probe map[string]float64) {
	keys := slices.Collect(maps.Keys(client))
	for k := range probe {
		if _, ok := client[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(client[b], client[a]), cmp.Compare(a, b)) })
	fmt.Fprintf(w, "\nThe browser's CPU during the upload (seconds, median of the runs for each; from /proc, every process of the driver's group; the renderer by thread):\n\n")
	fmt.Fprintf(w, "| where | demo page | raw probe |\n|---|---|---|\n")
	var tc, tp float64
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %.2f | %.2f |\n", k, client[k], probe[k])
		tc, tp = tc+client[k], tp+probe[k]
	}
	fmt.Fprintf(w, "| sum of the rows (the target above takes the median of the runs' totals) | %.2f | %.2f |\n", tc, tp)
}

const browserProbeHow = `Raw browser probe: the browser's own floor here. The same demo page
(same origin, same Chromium flags) picks the file into an input of its
own and PUTs the parts the client PUTs (the client's part size and
parts in flight for this file), through XMLHttpRequest with upload
progress listened to, as the client's transport does, hashing nothing:
the benchmark computed the parts' SHA-256 beforehand and had the real
API create the upload and sign them (untimed). Then the complete, through
the API. Main-thread tasks: PerformanceObserver "longtask" entries.`

// largeFileWhy explains the large-file figures; the tables above are what
// was measured.
const largeFileWhy = `Why parts may not reach 1.5× one PUT here: on two cores shared by the
client, the front door, the functions and the S3 server, which hashes
every part again to check its signed checksum, the gain of parallel parts
is bounded by CPU, not by the network. One PUT hashes the whole file
before its create (its SHA-256 is signed in the URL); parts are hashed
one by one just before they are sent, so they start at once (the first
part table below). Then Versity Gateway's CompleteMultipartUpload copies
the parts into one new object, a cost that one PUT does not have (AWS S3
completes without copying). The AWS CLI sends 10 parts at once and makes
no pass over the file before its first byte.`

func runsOf(lf *bench.LargeFile) int {
	n := 0
	for _, w := range lf.Ways {
		n = max(n, len(w.Seconds))
	}
	return n
}
