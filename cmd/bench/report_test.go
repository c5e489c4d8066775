package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/internal/tooling/bench"
)

// The report prints only the sections that ran, and the new targets with
// their ratios.
func TestPrintMarkdownSections(t *testing.T) {
	rep := report{
		Sections: []string{"tusd", "probe", "firstpart", "browser"},
		LargeFile: &bench.LargeFile{Bytes: 1 << 30, Parallel: 4, Ways: []bench.LargeFileWay{
			{Name: bench.WayParts, Seconds: []float64{4}, MedianMiBps: 256, PeakRSSKiB: 20 << 10},
			{Name: bench.WayOnePut, Note: "not selected"},
			{Name: bench.WayAWS, Note: "not selected"},
			{Name: bench.WayTusd, Seconds: []float64{8}, MedianMiBps: 128},
			{Name: bench.WayProbe, Seconds: []float64{2}, MedianMiBps: 512},
		}},
		FirstPart: &bench.FirstPart{Bytes: 4 << 30, CLI: bench.FirstPartRun{Seconds: 0.5, Runs: []float64{0.7, 0.5, 0.4}, PollMs: 10}, Chromium: bench.FirstPartRun{Note: "no browser"}},
		Browser: &bench.BrowserUpload{Bytes: 1 << 30, Runs: []float64{16, 15, 17}, Seconds: 16, MiBps: 64, LongestTaskMs: 62, LongTasks: 2, LongTaskRuns: []int{1, 2, 0}, Parts: 128, MaxInFlight: 4,
			CPU: map[string]float64{"network": 3, "renderer: DedicatedWorker": 1.5}, CPURuns: []float64{4.0, 5.0, 4.6}},
		BrowserProbe: &bench.BrowserProbe{Bytes: 1 << 30, PartBytes: 8 << 20, Parallel: 4, Runs: []float64{12.5, 12.8, 12.9}, Seconds: 12.8, MiBps: 80, PutSeconds: 10.25, LongTaskRuns: []int{0, 0, 1},
			CPU: map[string]float64{"network": 2.75, "browser": 0.5}, CPURuns: []float64{3.0, 3.4, 3.2}},
	}
	var b strings.Builder
	printMarkdown(&b, rep)
	out := b.String()
	for _, want := range []string{
		"| CLI in parts ≥ 1.5× tusd + tus-js-client (MiB/s: 256 vs 128) | 2.00× | met |",
		"| CLI in parts ≥ 0.8× the raw probe (MiB/s: 256 vs 512) | 0.50× | MISSED |",
		"| CLI peak RSS < 64 MiB (VmHWM, largest of the runs) | 20.0 MiB | met |",
		"| upload CLI (defaults) | 0.50 s | 0.70, 0.50, 0.40 | met |",
		"| demo page in Chromium (headless) | not run: no browser | | |",
		"| demo page (the browser client) | 16.00, 15.00, 17.00 | 64 | 62 ms | pick to the row shown completed: 128 part PUTs seen, at most 4 in flight |",
		"| raw browser probe | 12.50, 12.80, 12.90 | 80 | 0 ms | first PUT to the complete answered (the PUTs alone: 10.25 s); 8 MiB parts, 4 in flight, no hashing |",
		"| upload CLI in parts (large-file section above) | 4.00 | 256 | — | its process start to exit |",
		"| browser client ≥ 0.8× the raw browser probe (MiB/s: 64 vs 80) | 0.80× | met |",
		"| no main-thread task over 50 ms while the client uploads (2 such tasks in the worst run) | 62 ms | MISSED |",
		"| main-thread tasks over 50 ms, median of the runs: the client's against the probe's (runs [1 2 0] vs [0 0 1]) | 1 vs 0 | — |",
		// The medians of the runs' totals (4.6 and 3.2), not the sums of the rows' medians (4.5 and 3.25).
		"| browser's CPU per GiB over all its processes ≤ 1.5× the probe's (4.6 s vs 3.2 s) | 1.44× | met |",
		"| where | demo page | raw probe |\n|---|---|---|\n| network | 3.00 | 2.75 |\n| renderer: DedicatedWorker | 1.50 | 0.00 |\n| browser | 0.00 | 0.50 |\n| sum of the rows (the target above takes the median of the runs' totals) | 4.50 | 3.25 |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"## Round trips", "## Hot path", "## Load", "## Binary size", "## Targets", "not selected", "Where the time goes"} {
		if strings.Contains(out, absent) {
			t.Errorf("the report has %q, of a section not run:\n%s", absent, out)
		}
	}
}

// A selected measurement that could not run fails the run, names its
// section and why in the report, its JSON and the error, and is never
// shown as a zero; one left out by --only is not missing.
func TestFinishFailsWhenASectionDidNotRun(t *testing.T) {
	const why = "web/dist/index.html is missing (make bench builds it: make web-build)"
	for _, c := range []struct {
		name    string
		rep     report
		notRun  []string
		notZero []string
	}{
		{"everything ran", report{
			Sections:     []string{"firstpart", "browser"},
			FirstPart:    &bench.FirstPart{Bytes: 4 << 30, CLI: bench.FirstPartRun{Seconds: 0.5, Runs: []float64{0.5}, PollMs: 10}, Chromium: bench.FirstPartRun{Seconds: 0.6, Runs: []float64{0.6}, PollMs: 10}},
			Browser:      &bench.BrowserUpload{Bytes: 1 << 30, Runs: []float64{16}, Seconds: 16, MiBps: 64},
			BrowserProbe: &bench.BrowserProbe{Bytes: 1 << 30, Runs: []float64{12.8}, Seconds: 12.8, MiBps: 80},
		}, nil, nil},
		{"the raw browser probe failed", report{
			Sections:     []string{"browser"},
			Browser:      &bench.BrowserUpload{Bytes: 1 << 30, Runs: []float64{16}, Seconds: 16, MiBps: 64},
			BrowserProbe: &bench.BrowserProbe{Bytes: 1 << 30, Note: "raw probe: part 3: HTTP 400: BadDigest"},
		}, []string{"browser: raw browser probe: raw probe: part 3: HTTP 400: BadDigest"}, []string{"| raw browser probe |"}},
		{"Chromium left out by --only", report{
			Sections:  []string{"firstpart"},
			FirstPart: &bench.FirstPart{Bytes: 4 << 30, CLI: bench.FirstPartRun{Seconds: 0.5, Runs: []float64{0.5}, PollMs: 10}, Chromium: bench.FirstPartRun{Note: "not selected (--only without browser)"}},
			LargeFile: &bench.LargeFile{Bytes: 1 << 30, Ways: []bench.LargeFileWay{
				{Name: bench.WayParts, Seconds: []float64{4}, MedianMiBps: 256},
				{Name: bench.WayAWS, Note: "not selected"},
			}},
		}, nil, nil},
		{"no web/dist", report{
			Sections:     []string{"firstpart", "browser"},
			FirstPart:    &bench.FirstPart{Bytes: 4 << 30, CLI: bench.FirstPartRun{Seconds: 0.5, Runs: []float64{0.5}, PollMs: 10}, Chromium: bench.FirstPartRun{Note: why}},
			Browser:      &bench.BrowserUpload{Bytes: 1 << 30, Note: why},
			BrowserProbe: &bench.BrowserProbe{Bytes: 1 << 30, Note: why},
		}, []string{
			"firstpart: demo page in Chromium: " + why,
			"browser: demo page in Chromium: " + why,
			"browser: raw browser probe: " + why,
		}, []string{"0.00 s", "0.0 s", "0 MiB/s", `"seconds": 0,`, `"mib_per_second": 0,`, `"longest_task_ms": 0,`}},
		{"no peer, no tusd, no AWS CLI", report{
			Sections: []string{"load", "large", "tusd"},
			PeerNote: "bench/peer/node_modules missing (make bench runs npm ci there)",
			LargeFile: &bench.LargeFile{Bytes: 1 << 30, Ways: []bench.LargeFileWay{
				{Name: bench.WayParts, Seconds: []float64{4}, MedianMiBps: 256},
				{Name: bench.WayAWS, Note: "no AWS CLI found (install it, or leave large out of --only)"},
				{Name: bench.WayTusd, Note: "node is not on PATH"},
			}},
		}, []string{
			"load: the Powertools peer: bench/peer/node_modules missing (make bench runs npm ci there)",
			"large: aws s3 cp: no AWS CLI found (install it, or leave large out of --only)",
			"tusd: tusd + tus-js-client: node is not on PATH",
		}, []string{"| tusd + tus-js-client | 0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			var b strings.Builder
			err := finish(&b, c.rep, out)
			md := b.String()
			raw, rerr := os.ReadFile(out)
			if rerr != nil {
				t.Fatalf("the JSON report was not written: %v", rerr)
			}
			var got struct {
				NotRun []string `json:"not_run"`
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.NotRun, c.notRun) {
				t.Errorf("JSON not_run = %q, want %q", got.NotRun, c.notRun)
			}
			if len(c.notRun) == 0 {
				if err != nil || strings.Contains(md, "Incomplete") {
					t.Errorf("finish = %v, want nil and a complete report:\n%s", err, md)
				}
				return
			}
			if err == nil {
				t.Fatalf("finish = nil, want an error naming %q", c.notRun)
			}
			for _, n := range c.notRun {
				if !strings.Contains(err.Error(), "\n  "+n) {
					t.Errorf("the error lacks the line %q:\n%v", n, err)
				}
				if !strings.Contains(md, "\n- "+n+"\n") {
					t.Errorf("the report lacks the line %q:\n%s", n, md)
				}
			}
			for _, zero := range c.notZero {
				if strings.Contains(md, zero) || strings.Contains(string(raw), zero) {
					t.Errorf("the report shows %q for a measurement not made:\n%s\n%s", zero, md, raw)
				}
			}
		})
	}
}

// The capacity section shows each path's units beside the server's, each
// upload's dollars per million at list prices, the record's size at each
// state with its units, and where the server and the rules part.
func TestPrintCapacity(t *testing.T) {
	two := 2.0
	put := bench.Call{Op: "PutItem", Sent: 1538, After: 1538, WriteUnits: 2, Reported: &two}
	replay := bench.Call{Op: "PutItem", Failed: true, Before: 1538, After: 1538, Sent: 1538, WriteUnits: 2}
	rep := report{
		Sections: []string{"capacity"},
		Capacity: &bench.CapacityReport{
			Paths:          map[string]bench.Capacity{"create": bench.Summarize([]bench.Call{put}), "replay-pending": bench.Summarize([]bench.Call{replay})},
			PathsWithToken: map[string]bench.Capacity{"create": {WriteUnits: 3}},
			Uploads: map[string]bench.UploadCapacity{bench.UploadSingle: {
				Capacity: bench.Capacity{Calls: map[string]int{"PutItem": 1, "GetItem": 1, "UpdateItem": 2}, WriteUnits: 6, ReadUnits: 1},
				Bytes:    1 << 20, S3Requests: map[string]int{"HeadObject": 2}, ClientPUTs: 1,
			}},
			MultipartParts: 128, MultipartBytes: 1 << 30,
		},
		RecordBytes: map[string]int{"pending_single": 1538, "pending_single_with_token": 2732},
	}
	var b strings.Builder
	printMarkdown(&b, rep)
	out := b.String()
	for _, want := range []string{
		"| create | PutItem 1 | 2 | 0 | 2 / 0 | 3 / 0 |",
		"| replay-pending | PutItem 1 | 2 | 0 | 0 / 0 (1 call(s) unreported) | — |",
		// 6 × $0.625 + 1 × $0.125 per million units; 1 PUT × $5 + 2 HEAD × $0.40 per million requests.
		"| single-put | 1048576 | 0 | GetItem 1, PutItem 1, UpdateItem 2 | 6 | 1 | 0 / 0 | HeadObject 2 | 1 | 3.88 | 5.80 |",
		"| pending_single | 1538 | 2 | 1 |",
		"| pending_single_with_token | 2732 | 3 | 1 |",
		"- replay-pending: PutItem (failed): rules 2, server none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
