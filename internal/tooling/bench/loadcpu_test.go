package bench

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The load worker runs in this test binary, as it does in cmd/bench's.
func TestMain(m *testing.M) {
	LoadWorker()
	os.Exit(m.Run())
}

func TestParseStatCPU(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		want       time.Duration
		wantErr    bool
	}{
		// utime 150 and stime 25 ticks: fields 14 and 15.
		{"plain", "4242 (node) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 11 0 100 1000000 2000 18446744073709551615", 1750 * time.Millisecond, false},
		{"a command with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 6 7", 70 * time.Millisecond, false},
		{"no command", "7 R 1", 0, true},
		{"cut short", "7 (x) R 1 2 3", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseStatCPU(c.stat)
			if (err != nil) != c.wantErr || got != c.want {
				t.Errorf("parseStatCPU(%q) = %v, %v; want %v (error: %v)", c.stat, got, err, c.want, c.wantErr)
			}
		})
	}
}

// A server this process started is found among its children by name.
func TestChildrenNamed(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if got := ChildrenNamed(os.Getpid(), "sleep"); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("ChildrenNamed(self, sleep) = %v; want it to hold %d", got, cmd.Process.Pid)
	}
	if got := ChildrenNamed(os.Getpid(), "no-such-server"); len(got) != 0 {
		t.Errorf("ChildrenNamed(self, no-such-server) = %v; want none", got)
	}
}

// A load run in a worker process sends the warm-up first, then the timed
// requests with the run's keys; the counters are zeroed between the two
// (atStart), so the warm-up counts in neither the result nor the CPU.
func TestRunLoadInAWorker(t *testing.T) {
	var seen atomic.Int64
	keys := make(chan string, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		select {
		case keys <- r.Header.Get("Idempotency-Key"):
		default:
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	var atStart int64 = -1
	run := LoadRun{API: srv.URL, Concurrency: 2, Count: 30, Warm: 7, Run: "worker-test", ReplayKeys: 4}
	res, cpu, err := RunLoad(context.Background(), run, CPUOf{Target: []int{os.Getpid()}, Processes: "this test"},
		func() { atStart = seen.Load(); drain(keys) })
	if err != nil {
		t.Fatal(err)
	}
	if atStart != 7 || seen.Load() != 37 {
		t.Errorf("server saw %d requests before the timed run and %d in all; want 7 and 37", atStart, seen.Load())
	}
	if res.Requests != 30 || res.Errors != 0 || res.Concurrency != 2 {
		t.Errorf("result %+v; want 30 requests at concurrency 2, no errors", res)
	}
	want := map[string]bool{}
	for i := range 4 {
		want[ReplayKeys("worker-test", 4)(i)] = true
	}
	if got := drain(keys); !maps.Equal(got, want) {
		t.Errorf("timed requests' keys %v; want the run's replayed keys %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if cpu.Processes != "this test" || cpu.TargetMs < 0 || cpu.LoadGeneratorMs < 0 || cpu.DynamoDBMs != 0 {
		t.Errorf("cpu %+v; want this test's, none negative, no DynamoDB server", cpu)
	}
}

// drain takes what ch holds now.
func drain(ch chan string) map[string]bool {
	got := map[string]bool{}
	for {
		select {
		case k := <-ch:
			got[k] = true
		default:
			return got
		}
	}
}
