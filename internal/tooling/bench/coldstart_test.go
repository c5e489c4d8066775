package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// coldStartOf is a round of one run, which spent a fifth of its time on
// a core.
func coldStartOf(median time.Duration) ColdStart {
	return ColdStart{Runs: []time.Duration{median}, Median: median, CPU: []time.Duration{median / 5}, CPUMedian: median / 5}
}

// A function is judged against the baseline of its own round, so a round
// on a busy machine (slow baseline, slow function) is not counted as the
// function's cost; the figure is the median of the rounds, with their
// spread.
func TestColdStartOverTheBaselineOfItsRound(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name                  string
		baseline, fn          []time.Duration
		over                  []time.Duration
		median, lowest, worst time.Duration
	}{
		{"steady", []time.Duration{40 * ms, 40 * ms, 40 * ms}, []time.Duration{46 * ms, 47 * ms, 45 * ms},
			[]time.Duration{6 * ms, 7 * ms, 5 * ms}, 6 * ms, 5 * ms, 7 * ms},
		{"one busy round", []time.Duration{40 * ms, 90 * ms, 41 * ms}, []time.Duration{46 * ms, 99 * ms, 48 * ms},
			[]time.Duration{6 * ms, 9 * ms, 7 * ms}, 7 * ms, 6 * ms, 9 * ms},
		{"faster than the baseline", []time.Duration{40 * ms}, []time.Duration{38 * ms},
			[]time.Duration{-2 * ms}, -2 * ms, -2 * ms, -2 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			var base []ColdStart
			f := FunctionColdStart{Function: "presign"}
			for i := range c.baseline {
				base = append(base, coldStartOf(c.baseline[i]))
				f.Rounds = append(f.Rounds, coldStartOf(c.fn[i]))
			}
			f.judge(base)
			if !slices.Equal(f.OverBaseline, c.over) || f.MedianOver != c.median || f.MinOver != c.lowest || f.MaxOver != c.worst || f.CPUOver != c.median/5 {
				t.Errorf("over baseline %v, median %v, spread %v to %v, CPU over %v; want %v, median %v, spread %v to %v, CPU over %v",
					f.OverBaseline, f.MedianOver, f.MinOver, f.MaxOver, f.CPUOver, c.over, c.median, c.lowest, c.worst, c.median/5)
			}
		})
	}
}

// Pooled keeps every round's runs and the memory read in the last round.
func TestPooledColdStart(t *testing.T) {
	ms := time.Millisecond
	got := Pooled([]ColdStart{
		{Runs: []time.Duration{5 * ms, 9 * ms}, RSSKiB: 100, Invocations: 1},
		{Runs: []time.Duration{7 * ms}, RSSKiB: 300, Invocations: 1001},
	})
	if want := []time.Duration{5 * ms, 9 * ms, 7 * ms}; !slices.Equal(got.Runs, want) || got.Median != 7*ms || got.RSSKiB != 300 || got.Invocations != 1001 {
		t.Errorf("Pooled = %+v; want runs %v, median 7ms, RSS 300 KiB after 1001 invocations", got, want)
	}
}

// A spawn that fails once (here a bootstrap that exits on its first start,
// as an emulator whose port was taken fails) is made again and counted;
// the rounds keep every spawn asked for.
func TestColdStartsRetryASpawnOnce(t *testing.T) {
	testenv.RequireTools(t, "aws-lambda-rie")
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello")
	if out, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", hello, "./testdata/hello").CombinedOutput(); err != nil {
		t.Fatalf("build hello: %v\n%s", err, out)
	}
	flaky := filepath.Join(dir, "flaky")
	script := "#!/bin/sh\nif [ ! -e \"$MARK\" ]; then : > \"$MARK\"; exit 1; fi\nexec \"$HELLO\"\n"
	if err := os.WriteFile(flaky, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"MARK=" + filepath.Join(dir, "failed-once"), "HELLO=" + hello}
	cs, err := MeasureColdStarts(context.Background(), Bootstrap{Function: "hello", Path: hello, Event: []byte(`{}`)},
		[]Bootstrap{{Function: "flaky", Path: flaky, Env: env, Event: []byte(`{}`)}}, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f := cs.Functions[0].Rounds[0]; len(f.CPU) != 2 || len(f.Wait) != 2 || f.CPUMedian <= 0 {
		t.Errorf("flaky's CPU %v and waits %v; want one of each per run, on a core for some time", f.CPU, f.Wait)
	}
	if cs.Retries != 1 || len(cs.Functions[0].Rounds[0].Runs) != 2 || len(cs.Baseline[0].Runs) != 2 {
		t.Errorf("retries %d, runs %d of flaky and %d of the baseline; want 1 retry and 2 runs each",
			cs.Retries, len(cs.Functions[0].Rounds[0].Runs), len(cs.Baseline[0].Runs))
	}
}

func TestParseSchedstat(t *testing.T) {
	for _, c := range []struct {
		line       string
		cpu, wait  time.Duration
		wantErrors bool
	}{
		{"539723582 10003055847 1867\n", 539723582, 10003055847, false},
		{"0 0 1", 0, 0, false},
		{"12", 0, 0, true},
		{"a b c", 0, 0, true},
	} {
		cpu, wait, err := parseSchedstat(c.line)
		if cpu != c.cpu || wait != c.wait || (err != nil) != c.wantErrors {
			t.Errorf("parseSchedstat(%q) = %v, %v, %v; want %v, %v (error: %v)", c.line, cpu, wait, err, c.cpu, c.wait, c.wantErrors)
		}
	}
}
