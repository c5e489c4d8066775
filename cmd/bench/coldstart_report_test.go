package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/bench"
)

// The cold-start section reports every function against the baseline of
// its round, the median of the rounds with their spread, and each
// bootstrap's size; the target is presign's.
func TestPrintColdStartPerFunction(t *testing.T) {
	ms := time.Millisecond
	round := func(d time.Duration) bench.ColdStart {
		// CPU is a tenth of the time, and the wait a half.
		return bench.ColdStart{Runs: []time.Duration{d}, Median: d, RSSKiB: 9000, Invocations: 1001,
			CPU: []time.Duration{d / 10}, CPUMedian: d / 10, Wait: []time.Duration{d / 2}, WaitMedian: d / 2}
	}
	fn := func(name string, over ...time.Duration) bench.FunctionColdStart {
		f := bench.FunctionColdStart{Function: name, OverBaseline: over, MedianOver: bench.Median(over), CPUOver: bench.Median(over) / 10}
		f.MinOver, f.MaxOver = over[0], over[0]
		for _, o := range over {
			f.MinOver, f.MaxOver = min(f.MinOver, o), max(f.MaxOver, o)
			f.Rounds = append(f.Rounds, round(40*ms+o))
		}
		return f
	}
	rep := report{
		Sections: []string{"coldstart"},
		Sizes: map[string]int64{"presign/arm64": 13 << 20, "presign/amd64": 14 << 20, "finalize/arm64": 12 << 20,
			"finalize/amd64": 12 << 20, "events/arm64": 17_000_000, "events/amd64": 11 << 20},
		ColdStarts: &bench.ColdStarts{Rounds: 3, Spawns: 9,
			Baseline: []bench.ColdStart{round(40 * ms), round(41 * ms), round(39 * ms)},
			Functions: []bench.FunctionColdStart{fn("presign", 6*ms, 9*ms, 7*ms), fn("presign, no AWS call", 4*ms, 3*ms, 5*ms),
				fn("finalize", 5*ms, 5*ms, 6*ms), fn("events", 3*ms, 2*ms, 4*ms)}},
		FunctionInits: map[string][]bench.PackageInit{"presign": {{Package: "a", ClockMs: 0.75}, {Package: "b", ClockMs: 0.5}}},
	}
	var b strings.Builder
	printMarkdown(&b, rep)
	out := b.String()
	for _, want := range []string{
		"| presign | 13.00 MiB | 14.00 MiB | 7.0 ms | 6.0 ms to 9.0 ms | 6.0 ms, 9.0 ms, 7.0 ms | 4.7 ms (0.7 ms) | 23.5 ms | 9000 KiB | 1.25 ms |",
		"| presign, no AWS call | (as above) | | 4.0 ms | 3.0 ms to 5.0 ms | 4.0 ms, 3.0 ms, 5.0 ms | 4.4 ms (0.4 ms) | 22.0 ms | 9000 KiB |  |",
		"| finalize | 12.00 MiB | 12.00 MiB | 5.0 ms | 5.0 ms to 6.0 ms |",
		"| events | 16.21 MiB | 11.00 MiB | 3.0 ms | 2.0 ms to 4.0 ms |",
		"medians 40.0 ms, 41.0 ms, 39.0 ms by round; its CPU to first answer 4.0 ms, waiting for a core 20.0 ms",
		"| presign cold start ≤ hello-world + 8 ms (median of 3 rounds) | 7.0 ms (spread 6.0 ms to 9.0 ms) | met |",
		"| bootstrap events/arm64 ≤ 16 MB | 16.21 MiB | MISSED |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// The create that presign answers without AWS is the sample create
// without its Idempotency-Key, still a valid event.
func TestCreateWithoutItsKey(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", "presign-create.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		RouteKey string            `json:"routeKey"`
		Headers  map[string]string `json:"headers"`
	}
	got := idempotencyKeyHeader.ReplaceAll(raw, nil)
	if err := json.Unmarshal(got, &ev); err != nil {
		t.Fatalf("the event without its key is not JSON: %v\n%s", err, got)
	}
	if _, ok := ev.Headers["idempotency-key"]; ok || ev.RouteKey != "POST /uploads" || len(ev.Headers) == 0 {
		t.Errorf("event without its key: route %q, headers %v; want POST /uploads with its other headers and no idempotency-key", ev.RouteKey, ev.Headers)
	}
}
