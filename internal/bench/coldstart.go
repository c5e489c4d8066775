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

	"github.com/onceupload/onceupload/internal/services"
)

// ColdStart is the time from spawning the emulator with a bootstrap to the
// first answer of an invocation, and the function's memory after many.
type ColdStart struct {
	Runs        []time.Duration `json:"runs_ns"`
	Median      time.Duration   `json:"median_ns"`
	RSSKiB      int64           `json:"rss_kib_after_invocations"`
	Invocations int             `json:"invocations"`
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
	cs.Median = Median(cs.Runs)
	return cs, nil
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
