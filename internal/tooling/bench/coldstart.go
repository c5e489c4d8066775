package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/services"
)

// ColdStart is the time from spawning the emulator with a bootstrap to the
// first answer of an invocation, and the function's memory after many.
type ColdStart struct {
	Runs        []time.Duration `json:"runs_ns"`
	Median      time.Duration   `json:"median_ns"`
	RSSKiB      int64           `json:"rss_kib_after_invocations"`
	Invocations int             `json:"invocations"`
	// CPU is, per run, the bootstrap's CPU time up to its first answer,
	// and Wait its time ready to run but waiting for a core, every thread
	// summed (/proc/<pid>/task/*/schedstat): on shared cores the time of a
	// run grows with Wait, its CPU much less.
	CPU        []time.Duration `json:"bootstrap_cpu_ns"`
	Wait       []time.Duration `json:"bootstrap_runqueue_wait_ns"`
	CPUMedian  time.Duration   `json:"bootstrap_cpu_median_ns"`
	WaitMedian time.Duration   `json:"bootstrap_runqueue_wait_median_ns"`
}

// MeasureColdStart spawns bootstrap under the emulator runs times, invoking
// event once each, then keeps the last one for invocations more and reads
// its resident memory.
func MeasureColdStart(ctx context.Context, bootstrap string, env []string, event []byte, runs, invocations int) (ColdStart, error) {
	var cs ColdStart
	for r := range runs {
		t0 := time.Now()
		p, err := services.StartRIE(ctx, services.RIEOptions{Bootstrap: bootstrap, Env: append(env, "AWS_LAMBDA_FUNCTION_NAME=bench")})
		if err != nil {
			return cs, err
		}
		url := p.Endpoint + services.InvokePath
		if err := invoke(ctx, url, event); err != nil {
			p.Stop()
			return cs, err
		}
		cs.Runs = append(cs.Runs, time.Since(t0))
		cpu, wait, err := childSchedstat(p.Pid())
		if err != nil {
			p.Stop()
			return cs, err
		}
		cs.CPU, cs.Wait = append(cs.CPU, cpu), append(cs.Wait, wait)
		if r == runs-1 {
			for range invocations {
				if err := invoke(ctx, url, event); err != nil {
					p.Stop()
					return cs, err
				}
			}
			cs.Invocations = invocations + 1
			cs.RSSKiB, err = childRSS(p.Pid())
			if err != nil {
				p.Stop()
				return cs, err
			}
		}
		p.Stop()
	}
	cs.Median, cs.CPUMedian, cs.WaitMedian = Median(cs.Runs), Median(cs.CPU), Median(cs.Wait)
	return cs, nil
}

// childSchedstat reads the CPU and run-queue wait of the emulator's child
// (the bootstrap), every thread summed. The bootstrap has answered and
// waits for its next event, so its figures are up to date.
func childSchedstat(emulatorPid int) (cpu, wait time.Duration, err error) {
	pids := childPids(emulatorPid)
	if len(pids) == 0 {
		return 0, 0, fmt.Errorf("no bootstrap process under the emulator %d", emulatorPid)
	}
	threads, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pids[0]))
	for _, f := range threads {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		c, w, err := parseSchedstat(string(raw))
		if err != nil {
			return 0, 0, err
		}
		cpu, wait = cpu+c, wait+w
	}
	return cpu, wait, nil
}

// parseSchedstat reads a schedstat line: nanoseconds on a core, nanoseconds
// waiting for one, and time slices.
func parseSchedstat(line string) (cpu, wait time.Duration, err error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("schedstat %q: too few fields", line)
	}
	c, err1 := strconv.ParseInt(f[0], 10, 64)
	w, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("schedstat %q: not numbers", line)
	}
	return time.Duration(c), time.Duration(w), nil
}

// childPids are the emulator's children (the bootstrap).
func childPids(emulatorPid int) []int {
	var pids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", emulatorPid))
	for _, f := range tasks {
		raw, _ := os.ReadFile(f)
		for _, p := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(p); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// Bootstrap is a function to start cold: its bootstrap, its environment
// and the event of its first invocation.
type Bootstrap struct {
	Function string
	Path     string
	Env      []string
	Event    []byte
}

// ColdStarts are rounds of cold starts. In each round the baseline and
// every function are started in turn, Spawns times over, so that the
// shared machine's drift falls on all of them alike, and each function is
// judged against the baseline of its own round.
type ColdStarts struct {
	Rounds int `json:"rounds"`
	Spawns int `json:"spawns_per_round"`
	// Baseline is the hello function's measurement in each round.
	Baseline  []ColdStart         `json:"baseline_rounds"`
	Functions []FunctionColdStart `json:"functions"`
	// Retries counts spawns made again because the first failed (an
	// emulator whose free port another process took first); a second
	// failure ends the measurement.
	Retries int `json:"spawn_retries"`
}

// FunctionColdStart is one function's cold start over the baseline.
type FunctionColdStart struct {
	Function string      `json:"function"`
	Rounds   []ColdStart `json:"rounds"`
	// OverBaseline is, per round, the function's median less the
	// baseline's median of the same round.
	OverBaseline []time.Duration `json:"over_baseline_ns"`
	// MedianOver is the median of OverBaseline; MinOver and MaxOver its
	// spread.
	MedianOver time.Duration `json:"median_over_baseline_ns"`
	MinOver    time.Duration `json:"min_over_baseline_ns"`
	MaxOver    time.Duration `json:"max_over_baseline_ns"`
	// CPUOver is the median, over the rounds, of the bootstrap's median
	// CPU to its first answer less the baseline's of the same round: the
	// function's own work, which waiting for a busy core does not inflate.
	CPUOver time.Duration `json:"cpu_over_baseline_ns"`
}

// MeasureColdStarts measures baseline and fns in rounds, each spawned
// (MeasureColdStart) once in turn, spawns times; at the last spawn of the
// last round each is then invoked invocations times more for its resident
// memory.
func MeasureColdStarts(ctx context.Context, baseline Bootstrap, fns []Bootstrap, rounds, spawns, invocations int) (ColdStarts, error) {
	cs := ColdStarts{Rounds: rounds, Spawns: spawns, Functions: make([]FunctionColdStart, len(fns))}
	all := append([]Bootstrap{baseline}, fns...)
	for r := range rounds {
		round := make([]ColdStart, len(all))
		for n := range spawns {
			extra := 0
			if r == rounds-1 && n == spawns-1 {
				extra = invocations
			}
			for i, b := range all {
				m, err := MeasureColdStart(ctx, b.Path, b.Env, b.Event, 1, extra)
				if err != nil && ctx.Err() == nil {
					cs.Retries++
					m, err = MeasureColdStart(ctx, b.Path, b.Env, b.Event, 1, extra)
				}
				if err != nil {
					return cs, fmt.Errorf("%s: %w", b.Function, err)
				}
				round[i].Runs = append(round[i].Runs, m.Runs...)
				round[i].CPU, round[i].Wait = append(round[i].CPU, m.CPU...), append(round[i].Wait, m.Wait...)
				round[i].RSSKiB, round[i].Invocations = m.RSSKiB, m.Invocations
			}
		}
		for i := range round {
			round[i].Median, round[i].CPUMedian, round[i].WaitMedian = Median(round[i].Runs), Median(round[i].CPU), Median(round[i].Wait)
		}
		cs.Baseline = append(cs.Baseline, round[0])
		for i, fn := range fns {
			cs.Functions[i].Function = fn.Function
			cs.Functions[i].Rounds = append(cs.Functions[i].Rounds, round[i+1])
		}
	}
	for i := range cs.Functions {
		cs.Functions[i].judge(cs.Baseline)
	}
	return cs, nil
}

// judge sets the function's figures over the baseline's rounds.
func (f *FunctionColdStart) judge(baseline []ColdStart) {
	f.OverBaseline = f.OverBaseline[:0]
	var cpu []time.Duration
	for r, m := range f.Rounds {
		f.OverBaseline = append(f.OverBaseline, m.Median-baseline[r].Median)
		cpu = append(cpu, m.CPUMedian-baseline[r].CPUMedian)
	}
	if len(f.OverBaseline) == 0 {
		return
	}
	f.MedianOver, f.CPUOver = Median(f.OverBaseline), Median(cpu)
	f.MinOver, f.MaxOver = slices.Min(f.OverBaseline), slices.Max(f.OverBaseline)
}

// Pooled is every run of rounds as one measurement: their runs, the median
// of all, and the last round's memory.
func Pooled(rounds []ColdStart) ColdStart {
	var p ColdStart
	for _, r := range rounds {
		p.Runs = append(p.Runs, r.Runs...)
		p.CPU, p.Wait = append(p.CPU, r.CPU...), append(p.Wait, r.Wait...)
		p.RSSKiB, p.Invocations = r.RSSKiB, r.Invocations
	}
	p.Median, p.CPUMedian, p.WaitMedian = Median(p.Runs), Median(p.CPU), Median(p.Wait)
	return p
}

func invoke(ctx context.Context, url string, event []byte) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(event))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" {
		return fmt.Errorf("invoke: status %d", resp.StatusCode)
	}
	return nil
}

// childRSS reads VmRSS of the emulator's child (the bootstrap).
func childRSS(emulatorPid int) (int64, error) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", emulatorPid))
	for _, f := range tasks {
		raw, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(raw)) {
			status, err := os.ReadFile("/proc/" + pid + "/status")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				}
			}
		}
	}
	return 0, fmt.Errorf("no bootstrap process under the emulator %d", emulatorPid)
}

// PackageInit is one package's init as GODEBUG=inittrace=1 reports it.
type PackageInit struct {
	Package string  `json:"package"`
	ClockMs float64 `json:"clock_ms"`
	Bytes   int64   `json:"bytes"`
	Allocs  int64   `json:"allocs"`
}

// InitTrace runs bootstrap once outside any emulator with
// GODEBUG=inittrace=1 and returns its package inits, slowest first. The
// process stops after its inits (it finds no Lambda runtime API); only the
// inits are read.
func InitTrace(ctx context.Context, bootstrap string, env []string) ([]PackageInit, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Env = append(slices.Clone(env), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // exits non-zero without a runtime API; the trace is what counts
	inits := ParseInitTrace(stderr.String())
	if len(inits) == 0 {
		return nil, fmt.Errorf("init trace of %s: no init lines in %q", bootstrap, stderr.String())
	}
	return inits, nil
}

// ParseInitTrace reads the runtime's "init PKG @T ms, C ms clock, B bytes,
// A allocs" lines, slowest first.
func ParseInitTrace(out string) []PackageInit {
	var inits []PackageInit
	for _, line := range strings.Split(out, "\n") {
		var p PackageInit
		var at float64
		if n, _ := fmt.Sscanf(line, "init %s @%f ms, %f ms clock, %d bytes, %d allocs", &p.Package, &at, &p.ClockMs, &p.Bytes, &p.Allocs); n == 5 {
			inits = append(inits, p)
		}
	}
	slices.SortStableFunc(inits, func(a, b PackageInit) int { return cmp.Compare(b.ClockMs, a.ClockMs) })
	return inits
}
