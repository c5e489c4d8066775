package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, which Linux
// fixes at 100 for user space on every architecture it exports it on.
const clockTick = 10 * time.Millisecond

// ProcCPU is the CPU time (user and system, every thread) pid has used.
func ProcCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(raw))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so fields count from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat %q: too few fields", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("proc stat: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// ChildrenNamed are the pids of parent's child processes whose command
// (/proc/<pid>/comm) is name: a local server the process started.
func ChildrenNamed(parent int, name string) []int {
	var pids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
	for _, f := range tasks {
		raw, _ := os.ReadFile(f)
		for _, p := range strings.Fields(string(raw)) {
			comm, err := os.ReadFile("/proc/" + p + "/comm")
			if pid, perr := strconv.Atoi(p); err == nil && perr == nil && strings.TrimSpace(string(comm)) == name {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// CPU is a load run's CPU time per request, by who spent it.
type CPU struct {
	// TargetMs is the target's processes' (Processes), in milliseconds.
	TargetMs  float64 `json:"target_ms_per_request"`
	Processes string  `json:"target_processes"`
	// LoadGeneratorMs is the load generator's, a process of its own.
	LoadGeneratorMs float64 `json:"load_generator_ms_per_request"`
	// DynamoDBMs is the local DynamoDB server's, which every target uses.
	DynamoDBMs float64 `json:"dynamodb_server_ms_per_request,omitempty"`
}

// LoadRun is one load run in a process of its own (LoadWorker), so that
// the CPU the load generator spends is not the target's.
type LoadRun struct {
	API         string `json:"api"`
	Concurrency int    `json:"concurrency"`
	Count       int    `json:"count"`
	// Warm requests with fresh keys go first, to open the connections and
	// warm both sides' code paths; they are neither timed nor counted.
	Warm int `json:"warm"`
	// Run names the keys (FreshKeys); ReplayKeys > 0 cycles over that many
	// keys of Run created beforehand (ReplayKeys).
	Run        string `json:"run"`
	ReplayKeys int    `json:"replay_keys"`
}

// loadWorkerEnv holds, in a load worker's environment, its LoadRun.
const loadWorkerEnv = "ONCEUPLOAD_BENCH_LOAD_RUN"

// LoadWorker is what a load worker does instead of its main: if the
// process was started as one (RunLoad), it warms up, says "ready" on
// stdout, waits for a line on stdin, runs the load and prints its
// LoadResult, then exits. Otherwise it returns at once.
func LoadWorker() {
	raw, ok := os.LookupEnv(loadWorkerEnv)
	if !ok {
		return
	}
	if err := loadWorker(raw); err != nil {
		fmt.Fprintln(os.Stderr, "load worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func loadWorker(raw string) error {
	var run LoadRun
	if err := json.Unmarshal([]byte(raw), &run); err != nil {
		return err
	}
	ctx := context.Background()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	if run.Warm > 0 {
		if _, err := Load(ctx, client, run.API, run.Concurrency, run.Warm, FreshKeys(run.Run+"-warm")); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	keys := FreshKeys(run.Run)
	if run.ReplayKeys > 0 {
		keys = ReplayKeys(run.Run, run.ReplayKeys)
	}
	res, err := Load(ctx, client, run.API, run.Concurrency, run.Count, keys)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// CPUOf names the processes whose CPU a load run reads.
type CPUOf struct {
	// Target are the target's processes, which Processes describes.
	Target    []int
	Processes string
	// DynamoDB are the local DynamoDB server's, if any.
	DynamoDB []int
}

// RunLoad runs run in a load worker (this executable again, which must
// call LoadWorker first). After the warm-up it calls atStart (to zero the
// target's counters) and samples the CPU of the processes of of, and again
// after the timed requests, to give their CPU per request.
func RunLoad(ctx context.Context, run LoadRun, of CPUOf, atStart func()) (LoadResult, CPU, error) {
	exe, err := os.Executable()
	if err != nil {
		return LoadResult{}, CPU{}, err
	}
	spec, _ := json.Marshal(run)
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), loadWorkerEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return LoadResult{}, CPU{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return LoadResult{}, CPU{}, err
	}
	if err := cmd.Start(); err != nil {
		return LoadResult{}, CPU{}, err
	}
	defer func() { _ = cmd.Wait() }()
	defer stdin.Close()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		return LoadResult{}, CPU{}, fmt.Errorf("load worker: %q, %v; want ready", line, err)
	}
	worker := []int{cmd.Process.Pid}
	atStart()
	before := [3]time.Duration{sumCPU(of.Target), sumCPU(worker), sumCPU(of.DynamoDB)}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		return LoadResult{}, CPU{}, err
	}
	var res LoadResult
	if err := json.NewDecoder(out).Decode(&res); err != nil {
		return LoadResult{}, CPU{}, fmt.Errorf("load worker's result: %w", err)
	}
	// The worker has answered and is exiting: its time is all spent.
	after := [3]time.Duration{sumCPU(of.Target), sumCPU(worker), sumCPU(of.DynamoDB)}
	perRequest := func(i int) float64 {
		return float64((after[i] - before[i]).Microseconds()) / 1000 / float64(run.Count)
	}
	cpu := CPU{TargetMs: perRequest(0), Processes: of.Processes, LoadGeneratorMs: perRequest(1)}
	if len(of.DynamoDB) > 0 {
		cpu.DynamoDBMs = perRequest(2)
	}
	return res, cpu, nil
}

// sumCPU is the CPU time of pids together; a pid that is gone counts 0.
func sumCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if d, err := ProcCPU(pid); err == nil {
			sum += d
		}
	}
	return sum
}
