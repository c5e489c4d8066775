package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// The browser client's defaults for a file of its size (web/src/client.ts:
// DEFAULT_PART_BYTES, partConcurrency, MAX_PARTS), which the raw probe
// copies so that it PUTs the parts the client PUTs. The client run reports
// the parts and the most PUTs in flight it was seen to send, so that a
// change of the client's defaults shows up as a difference in the report.
const (
	webMinPartBytes = 8 << 20
	webParallel     = 4
	webMaxParts     = 10_000
)

// WebPartSize is web/src/client.ts choosePartSize with its defaults: 8 MiB,
// or the smallest whole number of MiB that keeps the file within 10,000
// parts.
func WebPartSize(size int64) int64 {
	needed := (size + webMaxParts - 1) / webMaxParts
	if needed <= webMinPartBytes {
		return webMinPartBytes
	}
	return (needed + 1<<20 - 1) / (1 << 20) * (1 << 20)
}

// BrowserProbe is the browser's own floor here: the demo page's context
// PUTs the parts the client would (same size, as many in flight, through
// XMLHttpRequest as the client's transport does) through presigned URLs
// the real API gave (a multipart create and signs, the parts' SHA-256
// computed by the benchmark beforehand), hashing nothing, then sends the
// complete. Timed in the page from the first PUT to the complete's answer.
type BrowserProbe struct {
	Bytes     int64     `json:"bytes"`
	PartBytes int64     `json:"part_bytes,omitempty"`
	Parallel  int       `json:"parallel,omitempty"`
	Runs      []float64 `json:"runs,omitempty"`
	Seconds   float64   `json:"seconds,omitempty"`
	MiBps     float64   `json:"mib_per_second,omitempty"`
	// PutSeconds is the median of the runs' time to the last PUT's answer,
	// without the complete.
	PutSeconds float64 `json:"put_seconds,omitempty"`
	// LongestTaskMs is the page's longest main-thread task during the
	// probe, over all runs (absent: none over 50 ms).
	LongestTaskMs float64 `json:"longest_task_ms,omitempty"`
	// LongTaskRuns is each run's count of main-thread tasks over 50 ms.
	LongTaskRuns []int `json:"long_task_runs,omitempty"`
	// CPU and CPURuns are the browser's CPU seconds from the pick to the
	// complete answered, as BrowserUpload's.
	CPU     map[string]float64 `json:"cpu_seconds,omitempty"`
	CPURuns []float64          `json:"cpu_seconds_runs,omitempty"`
	Note    string             `json:"note,omitempty"`
}

// probePlan is what bench/browser/upload.mjs reads from PROBE_PATH.
type probePlan struct {
	Concurrency int         `json:"concurrency"`
	Parts       []probePart `json:"parts"`
	Complete    struct {
		URL  string `json:"url"`
		Body string `json:"body"`
	} `json:"complete"`
}

type probePart struct {
	PartNumber int   `json:"partNumber"`
	Start      int64 `json:"start"`
	End        int64 `json:"end"`
	api.PutInstructions
}

// partSums is the SHA-256 (hex) of each part of file, computed once.
func partSums(file string, size, partSize int64) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var sums []string
	for off := int64(0); off < size; off += partSize {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, off, min(partSize, size-off))); err != nil {
			return nil, err
		}
		sums = append(sums, hex.EncodeToString(h.Sum(nil)))
	}
	return sums, nil
}

// probeRun is one run of the raw probe, in seconds.
type probeRun struct {
	seconds, puts, longestTaskMs float64
	longTasks                    int
	cpu                          cpuShares
}

// runProbe creates a multipart upload through the API, signs every part
// with its known SHA-256, and has the page PUT them and complete it.
func runProbe(ctx context.Context, d *BrowserDriver, apiURL, file string, bytes, partSize int64, sums []string, run int) (probeRun, error) {
	c, err := client.New(apiURL)
	if err != nil {
		return probeRun{}, err
	}
	created, err := c.Create(ctx, client.NewKey(), api.CreateRequest{
		Filename: fmt.Sprintf("browser-probe-%d.bin", run), ContentType: "application/octet-stream", Size: bytes, PartSize: partSize,
	})
	if err != nil {
		return probeRun{}, fmt.Errorf("probe: create: %w", err)
	}
	id := created.Upload.UploadID
	plan := probePlan{Concurrency: webParallel}
	toSign := make([]api.PartToSign, len(sums))
	for i, s := range sums {
		toSign[i] = api.PartToSign{PartNumber: i + 1, SHA256: s}
	}
	for i := 0; i < len(toSign); i += api.MaxPartsPerSign {
		signed, err := c.SignParts(ctx, id, toSign[i:min(len(toSign), i+api.MaxPartsPerSign)])
		if err != nil {
			return probeRun{}, fmt.Errorf("probe: sign: %w", err)
		}
		for _, sp := range signed {
			start := int64(sp.PartNumber-1) * partSize
			plan.Parts = append(plan.Parts, probePart{PartNumber: sp.PartNumber, Start: start, End: min(bytes, start+partSize), PutInstructions: sp.PutInstructions})
		}
	}
	body, _ := json.Marshal(api.CompleteRequest{Parts: toSign})
	plan.Complete.URL, plan.Complete.Body = apiURL+"/uploads/"+id+"/complete", string(body)
	raw, _ := json.Marshal(plan)
	path := filepath.Join(filepath.Dir(d.LogPath), fmt.Sprintf("browser-probe-%d.json", run))
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return probeRun{}, err
	}
	defer os.Remove(path)

	wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	r, err := d.start(wctx, file, "probe", "PROBE_PATH="+path)
	if err != nil {
		return probeRun{}, err
	}
	if _, err := r.event(wctx, "probing"); err != nil {
		_ = r.stop()
		return probeRun{}, err
	}
	before := treeCPU(r.cmd.Process.Pid)
	e, err := r.event(wctx, "probed")
	if err != nil {
		_ = r.stop()
		return probeRun{}, err
	}
	cpu := treeCPU(r.cmd.Process.Pid).minus(before)
	if err := r.stop(); err != nil {
		return probeRun{}, err
	}
	return probeRun{seconds: (e.EpochMs - e.StartMs) / 1000, puts: (e.PutsDoneMs - e.StartMs) / 1000, longestTaskMs: e.LongestTaskMs, longTasks: e.LongTasks, cpu: cpu}, nil
}

// totals is each run's CPU seconds over every process and thread.
func totals(runs []cpuShares) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		for _, v := range r {
			out[i] += v
		}
	}
	return out
}

// medianShares is each key's median over the runs (a run without the key
// counts as 0 for it).
func medianShares(runs []cpuShares) map[string]float64 {
	keys := map[string]bool{}
	for _, r := range runs {
		for k := range r {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k := range keys {
		vs := make([]float64, len(runs))
		for i, r := range runs {
			vs[i] = r[k]
		}
		out[k] = Median(vs)
	}
	return out
}
