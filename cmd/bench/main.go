// Command bench measures the system and prints one report (Markdown on
// stdout, JSON to --out): round trips per request, the DynamoDB capacity
// units of each path and whole upload (and the record's size), hot-path CPU, load
// through the local front door side by side with a Powertools peer, cold
// start and binary size, and a large file: the CLI against the AWS CLI,
// tusd and a raw S3 probe, its peak RSS, the time to the first part stored
// (CLI and Chromium) and a whole upload in Chromium. It is what `make
// bench` runs; numbers are printed, never asserted. --only picks sections:
//
//	make bench BENCH_FLAGS="--only large,tusd,probe,firstpart,browser"
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/onceupload/onceupload/internal/callcount"
	"github.com/onceupload/onceupload/internal/tooling/bench"
	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
)

type report struct {
	Date       string             `json:"date"`
	Machine    string             `json:"machine"`
	RoundTrips bench.RoundTrips   `json:"round_trips"`
	HotPath    []benchLine        `json:"hot_path"`
	Load       []bench.LoadResult `json:"load"`
	Sizes      map[string]int64   `json:"bootstrap_bytes"`
	// ColdStart is presign's, every round's runs pooled (ColdStarts).
	ColdStart bench.ColdStart `json:"cold_start"`
	// Baseline is the same measurement of the smallest Go function.
	Baseline bench.ColdStart `json:"cold_start_hello_baseline"`
	// ColdStarts are each function's, in rounds against the baseline.
	ColdStarts *bench.ColdStarts `json:"cold_starts,omitempty"`
	// Inits are presign's package inits, slowest first (GODEBUG=inittrace=1).
	Inits []bench.PackageInit `json:"presign_package_inits"`
	// FunctionInits are every function's, presign's among them.
	FunctionInits map[string][]bench.PackageInit `json:"package_inits"`
	// LargeFile is absent when --large-file is 0.
	LargeFile *bench.LargeFile `json:"large_file,omitempty"`
	// FirstPart (--first-part-file) and Browser (the --large-file file in
	// Chromium), when run.
	FirstPart *bench.FirstPart     `json:"first_part,omitempty"`
	Browser   *bench.BrowserUpload `json:"browser_upload,omitempty"`
	// Capacity is the DynamoDB units per path and per upload, and
	// RecordBytes the record's size at each state (--only capacity).
	Capacity    *bench.CapacityReport `json:"capacity,omitempty"`
	RecordBytes map[string]int        `json:"record_bytes,omitempty"`
	// BrowserProbe is the raw browser probe, run in turns with Browser.
	BrowserProbe *bench.BrowserProbe `json:"browser_probe,omitempty"`
	// PeerNote says why the Powertools peer of the load section did not run.
	PeerNote string `json:"peer_not_run,omitempty"`
	// Sections are those run (--only).
	Sections []string `json:"sections"`
	// NotRun is what was selected but did not run, and why (notRun); the
	// run fails when it is not empty.
	NotRun []string `json:"not_run,omitempty"`
}

// allSections are --only's choices, in the order they run.
var allSections = []string{"roundtrips", "capacity", "hotpath", "load", "coldstart", "large", "tusd", "probe", "firstpart", "browser"}

// selected says whether --only picked a section.
var selected = map[string]bool{}

func (r report) ran(section string) bool { return slices.Contains(r.Sections, section) }

type benchLine struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op_median"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
}

func main() {
	bench.LoadWorker() // when this process is a load run's worker (bench.RunLoad), that and no more
	flag.IntVar(&loadCount, "count", 1000, "requests per load run")
	out := flag.String("out", ".build/bench/report.json", "where to write the JSON report")
	flag.StringVar(&bootstraps, "bootstraps", ".build", "where make bench built the bootstraps the cold-start section measures: make build's <arch>/<LogicalId>/bootstrap for arm64 and amd64, and bench/hello/bootstrap")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (front door and in-process functions included) here")
	flag.Int64Var(&largeFile.size, "large-file", 1<<30, "bytes of the large-file comparison's file (0: skip the section)")
	flag.IntVar(&largeFile.runs, "large-file-runs", 3, "runs of each way in the large-file comparison")
	flag.Int64Var(&largeFile.firstPart, "first-part-file", 4<<30, "bytes of the file whose first stored part is timed, CLI and Chromium (0: skip)")
	flag.Int64Var(&capacityFile, "capacity-file", 1<<30, "bytes of the multipart upload the capacity section sends the CLI's way (64 MiB at least: the CLI sends less in one PUT)")
	only := flag.String("only", strings.Join(allSections, ","), "sections to run, comma-separated: "+strings.Join(allSections, ", ")+
		" (tusd and probe run with the CLI in parts of the large-file comparison, large adds its one PUT, aws s3 cp and phases;"+
		" firstpart times the CLI, and Chromium too with browser; browser uploads the --large-file file in Chromium)")
	flag.Parse()
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allSections, s) {
			fmt.Fprintf(os.Stderr, "bench: --only: unknown section %q (sections: %s)\n", s, strings.Join(allSections, ", "))
			os.Exit(2)
		}
		selected[s] = true
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// loadCount is --count.
var loadCount int

func run(ctx context.Context, out string) error {
	rep := report{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Sizes: map[string]int64{}}
	for _, s := range allSections {
		if selected[s] {
			rep.Sections = append(rep.Sections, s)
		}
	}
	var calls callcount.Counter
	var meter bench.Meter // armed by the capacity section only
	dir, err := os.MkdirTemp("", "onceupload-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	static := ""
	if _, err := os.Stat("web/dist/index.html"); err == nil {
		static = "web/dist" // the demo page, for the Chromium sections
	}
	st, err := devstack.Start(ctx, devstack.Config{
		DataDir: dir, Table: "idempotency-bench", Bucket: "uploads-bench",
		APIOptions: []func(*middleware.Stack) error{calls.Middleware, meter.Middleware},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		StaticDir:  static,
	})
	if err != nil {
		return err
	}
	defer st.Close()

	if err := sections(ctx, &rep, st, &calls, &meter, dir); err != nil {
		return err
	}
	return finish(os.Stdout, rep, out)
}

// finish prints the report and writes its JSON to out, then fails if a
// selected measurement did not run: a report with a hole in it must not
// pass for a whole one (or show the hole as a zero).
func finish(w io.Writer, rep report, out string) error {
	rep.NotRun = rep.notRun()
	printMarkdown(w, rep)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		return err
	}
	if len(rep.NotRun) > 0 {
		return fmt.Errorf("%d selected measurement(s) did not run, so the report is incomplete:\n  %s", len(rep.NotRun), strings.Join(rep.NotRun, "\n  "))
	}
	return nil
}

// sections runs the selected sections on the stack.
func sections(ctx context.Context, rep *report, st *devstack.Stack, calls *callcount.Counter, meter *bench.Meter, dir string) error {
	var err error
	if rep.ran("roundtrips") {
		if err := roundTrips(ctx, rep, st); err != nil {
			return err
		}
	}
	if rep.ran("capacity") {
		if err := capacity(ctx, rep, st, meter); err != nil {
			return err
		}
	}
	if rep.ran("hotpath") {
		fmt.Fprintln(os.Stderr, "bench: hot path (go test -bench)")
		if rep.HotPath, err = hotPath(ctx); err != nil {
			return err
		}
	}
	if rep.ran("load") {
		if err := load(ctx, rep, st, calls, dir); err != nil {
			return err
		}
	}
	if rep.ran("coldstart") {
		if err := coldStart(ctx, rep, st); err != nil {
			return err
		}
	}
	if largeFile.size > 0 && (rep.ran("large") || rep.ran("tusd") || rep.ran("probe")) {
		fmt.Fprintf(os.Stderr, "bench: a %d MiB file: upload CLI in parts against %s\n", largeFile.size>>20, strings.Join(slices.DeleteFunc([]string{"large", "tusd", "probe"}, func(s string) bool { return !rep.ran(s) }), ", "))
		lf, err := measureLargeFile(ctx, rep, st, dir)
		if err != nil {
			return err
		}
		rep.LargeFile = &lf
	}
	if largeFile.size > 0 && rep.ran("browser") {
		fmt.Fprintf(os.Stderr, "bench: a %d MiB file through the demo page in Chromium\n", largeFile.size>>20)
		if err := measureBrowser(ctx, rep, st, dir); err != nil {
			return err
		}
	}
	if largeFile.firstPart > 0 && rep.ran("firstpart") {
		fmt.Fprintf(os.Stderr, "bench: a %d MiB file: time to the first part stored, CLI and Chromium\n", largeFile.firstPart>>20)
		if err := measureFirstPart(ctx, rep, st, dir); err != nil {
			return err
		}
	}
	return nil
}

// roundTrips counts the AWS calls of each path.
func roundTrips(ctx context.Context, rep *report, st *devstack.Stack) error {
	var err error
	fmt.Fprintln(os.Stderr, "bench: round trips")
	// The round trips run on a bucket of their own: the dev stack's finalize
	// records only its own bucket's objects, so it cannot record the measured
	// upload before the measured finalize does (which made it a duplicate).
	rtBucket := "roundtrips-bench"
	s3c := s3Client(st)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(rtBucket)}); err != nil {
		return fmt.Errorf("round trips: create bucket: %w", err)
	}
	rep.RoundTrips, err = bench.MeasureRoundTrips(ctx, st.DynamoURL, st.Table, st.S3URL, rtBucket)
	return err
}

// load runs POST /uploads under load, ours and the Powertools peer's.
func load(ctx context.Context, rep *report, st *devstack.Stack, calls *callcount.Counter, dir string) error {
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	// Each target's CPU is read from /proc: ours is this process (the front
	// door and the functions, in process; the load generator runs in a
	// process of its own), the peer's its one Node process (its front door
	// and its function).
	type target = struct {
		name, api string
		reset     func()
		calls     func() int
		pids      []int
		processes string
	}
	targets := []target{{"onceupload", st.APIURL, calls.Reset, calls.Total, []int{os.Getpid()},
		"the bench process: front door and in-process functions (and the local stack's pollers)"}}
	dynamo := bench.ChildrenNamed(os.Getpid(), "dynoxide")
	peer, err := startPeer(ctx, st, dir)
	if err != nil {
		rep.PeerNote = err.Error()
	} else {
		defer peer.stop()
		targets = append(targets, target{"powertools-peer", peer.url, peer.reset, peer.calls, []int{peer.proc.Pid()},
			"the peer's Node process: its front door and its function"})
	}
	for ti, tgt := range targets {
		for _, workload := range []string{"fresh", "replay"} {
			for _, conc := range []int{1, 8, 32} {
				run := fmt.Sprintf("%d-%s-%d-%d", ti, workload, conc, time.Now().UnixNano())
				if workload == "replay" {
					// The 64 keys the run replays, created first.
					if _, err := bench.Load(ctx, httpClient, tgt.api, 8, 64, bench.ReplayKeys(run, 64)); err != nil {
						return err
					}
				}
				// The worker warms up connections and both runtimes' code
				// paths first.
				fmt.Fprintf(os.Stderr, "bench: load %s %s c=%d\n", tgt.name, workload, conc)
				lr := bench.LoadRun{API: tgt.api, Concurrency: conc, Count: loadCount, Warm: min(200, loadCount), Run: run}
				if workload == "replay" {
					lr.ReplayKeys = 64
				}
				res, cpu, err := bench.RunLoad(ctx, lr, bench.CPUOf{Target: tgt.pids, Processes: tgt.processes, DynamoDB: dynamo}, tgt.reset)
				if err != nil {
					return err
				}
				res.Target, res.Workload, res.CPU = tgt.name, workload, &cpu
				res.CallsPerRequest = float64(tgt.calls()) / float64(loadCount)
				rep.Load = append(rep.Load, res)
			}
		}
	}

	return nil
}

// bootstraps is --bootstraps.
var bootstraps string

// coldStart measures the bootstraps make bench built (make build's, for
// both architectures; the hello baseline for this machine's) and starts
// each function cold, in rounds against the baseline.
func coldStart(ctx context.Context, rep *report, st *devstack.Stack) error {
	fmt.Fprintln(os.Stderr, "bench: bootstrap size and cold start")
	built := func(path string) (int64, error) {
		info, err := os.Stat(path)
		if err != nil {
			return 0, fmt.Errorf("cold start: no bootstrap at %s (make bench builds them into .build)", path)
		}
		return info.Size(), nil
	}
	for _, arch := range []string{"arm64", "amd64"} {
		for _, fn := range coldStartFunctions {
			if fn.alsoOf != "" {
				continue
			}
			size, err := built(filepath.Join(bootstraps, arch, fn.logicalID, "bootstrap"))
			if err != nil {
				return err
			}
			rep.Sizes[fn.name+"/"+arch] = size
		}
	}
	hello := filepath.Join(bootstraps, "bench", "hello", "bootstrap")
	if _, err := built(hello); err != nil {
		return err
	}
	env := []string{"TABLE_NAME=" + st.Table, "BUCKET_NAME=" + st.Bucket, "AWS_ENDPOINT_URL_DYNAMODB=" + st.DynamoURL,
		"AWS_ENDPOINT_URL_S3=" + st.S3URL, "S3_FORCE_PATH_STYLE=true", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=localsecret",
		"AWS_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_LAMBDA_LOG_LEVEL=ERROR"}
	if st.EventBusURL != "" {
		env = append(env, "AWS_ENDPOINT_URL_EVENTBRIDGE="+st.EventBusURL)
	}
	// This machine's build runs here under the emulator, each function on
	// its first event: presign a create (one PutItem), and the same create
	// without its Idempotency-Key (answered 400 before any AWS call: start-up
	// alone); finalize the sample object in the stack's bucket (one
	// HeadObject, which finds no object); events an empty batch (no call: a
	// stream record needs a stored item).
	var fns []bench.Bootstrap
	for _, fn := range coldStartFunctions {
		event := []byte(`{"Records":[]}`)
		if fn.event != "" {
			raw, err := os.ReadFile(filepath.Join("events", fn.event))
			if err != nil {
				return err
			}
			event = []byte(strings.ReplaceAll(string(raw), sampleBucket, st.Bucket))
		}
		if fn.alsoOf != "" {
			event = idempotencyKeyHeader.ReplaceAll(event, nil)
		}
		fns = append(fns, bench.Bootstrap{Function: fn.name, Path: filepath.Join(bootstraps, runtime.GOARCH, fn.logicalID, "bootstrap"), Env: env, Event: event})
	}
	cs, err := bench.MeasureColdStarts(ctx, bench.Bootstrap{Function: "hello", Path: hello, Event: []byte(`{}`)}, fns, 3, 9, 1000)
	if err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	rep.ColdStarts = &cs
	rep.Baseline = bench.Pooled(cs.Baseline)
	rep.FunctionInits = map[string][]bench.PackageInit{}
	for i, fn := range fns {
		if coldStartFunctions[i].alsoOf != "" {
			continue
		}
		if rep.FunctionInits[fn.Function], err = bench.InitTrace(ctx, fn.Path, env); err != nil {
			return err
		}
		if fn.Function == "presign" {
			rep.ColdStart, rep.Inits = bench.Pooled(cs.Functions[i].Rounds), rep.FunctionInits[fn.Function]
		}
	}
	return nil
}

// coldStartFunctions are the bootstraps the cold-start section sizes and
// starts: the function, its directory under make build's <arch>, and the
// sample event (events/) of its first invocation, if it has one.
// A row alsoOf another function starts the same bootstrap on an event it
// answers without AWS (its size is the other's).
var coldStartFunctions = []struct{ name, logicalID, event, alsoOf string }{
	{"presign", "PresignFunction", "presign-create.json", ""},
	{"presign, no AWS call", "PresignFunction", "presign-create.json", "presign"},
	{"finalize", "FinalizeFunction", "finalize-object-created.json", ""},
	{"events", "EventsFunction", "", ""},
}

// idempotencyKeyHeader is the create sample's Idempotency-Key header.
var idempotencyKeyHeader = regexp.MustCompile(`"idempotency-key": "[^"]*",\s*`)

// sampleBucket is the bucket events/finalize-object-created.json names.
const sampleBucket = "onceupload-123456789012-us-east-1-50e2416294e0"

var benchRE = regexp.MustCompile(`^Benchmark([\w/]+)-\d+\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) B/op\s+([\d.]+) allocs/op`)

// hotPath runs the Go benchmarks of the presign and finalize paths and of
// the record store (claim, item codec) and of MakeIdempotent six times and keeps
// the median ns/op.
func hotPath(ctx context.Context) ([]benchLine, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "6", "./internal/upload/", "./pkg/api/", "./pkg/idempotency/", "./pkg/idempotency/recordstore/")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %v\n%s", err, outb)
	}
	samples := map[string][]float64{}
	var lines []benchLine
	for _, l := range strings.Split(string(outb), "\n") {
		m := benchRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ns, _ := strconv.ParseFloat(m[2], 64)
		b, _ := strconv.ParseFloat(m[3], 64)
		a, _ := strconv.ParseFloat(m[4], 64)
		if _, seen := samples[m[1]]; !seen {
			lines = append(lines, benchLine{Name: m[1], BytesPerOp: b, AllocsPerOp: a})
		}
		samples[m[1]] = append(samples[m[1]], ns)
	}
	for i := range lines {
		lines[i].NsPerOp = bench.Median(samples[lines[i].Name])
	}
	return lines, nil
}

type peerProc struct {
	proc *services.Process
	url  string
}

// startPeer runs the Powertools peer (bench/peer) on the same DynamoDB and
// S3 servers, behind the same kind of HTTP front.
func startPeer(ctx context.Context, st *devstack.Stack, dir string) (*peerProc, error) {
	if _, err := os.Stat("bench/peer/node_modules"); err != nil {
		return nil, fmt.Errorf("bench/peer/node_modules missing (make bench runs npm ci there)")
	}
	proc, err := services.StartNode(ctx, services.NodeOptions{
		Options: services.Options{LogPath: filepath.Join(dir, "peer.log")},
		Dir:     "bench/peer", Script: "server.mjs", Ready: "peer listening on",
		Env: []string{"TABLE_NAME=peer-bench", "BUCKET_NAME=" + st.Bucket,
			"AWS_ENDPOINT_URL_DYNAMODB=" + st.DynamoURL, "AWS_ENDPOINT_URL_S3=" + st.S3URL, "AWS_REGION=" + services.Region,
			"AWS_ACCESS_KEY_ID=" + services.AccessKey, "AWS_SECRET_ACCESS_KEY=" + services.SecretKey},
	})
	if err != nil {
		return nil, err
	}
	return &peerProc{proc: proc, url: proc.Endpoint}, nil
}

func (p *peerProc) stop() { _ = p.proc.Stop() }

func (p *peerProc) reset() {
	resp, err := http.Post(p.url+"/__stats/reset", "application/json", nil)
	if err == nil {
		resp.Body.Close()
	}
}

func (p *peerProc) calls() int {
	resp, err := http.Get(p.url + "/__stats")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var s struct {
		DynamoDBCalls int `json:"dynamodbCalls"`
		S3Calls       int `json:"s3Calls"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s.DynamoDBCalls + s.S3Calls
}

func machine() string {
	cpu := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores shared by the load generator, the front door, the functions and both servers", cpu, runtime.NumCPU())
}
