package main

import (
	"strings"
	"testing"

	"github.com/onceupload/onceupload/internal/bench"
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
		Browser:   &bench.BrowserUpload{Bytes: 1 << 30, Seconds: 16, MiBps: 64},
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
		"16.0 s, 64 MiB/s",
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
