package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onceupload/onceupload/internal/services"
)

// BuildBootstrap builds a function as the Makefile does, for arch
// (services.BuildBootstrap), and returns the binary's size.
func BuildBootstrap(pkg, arch, out string) (int64, error) {
	if err := services.BuildBootstrap(pkg, arch, out); err != nil {
		return 0, err
	}
	info, err := os.Stat(out)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

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
	sorted := slices.Clone(cs.Runs)
	slices.Sort(sorted)
	cs.Median = sorted[len(sorted)/2]
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
