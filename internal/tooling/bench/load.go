package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LoadResult is one load run.
type LoadResult struct {
	Target      string  `json:"target"`
	Workload    string  `json:"workload"`
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RPS         float64 `json:"requests_per_second"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	// CallsPerRequest is AWS calls (DynamoDB and S3) per request.
	CallsPerRequest float64 `json:"aws_calls_per_request"`
	// CPU is the CPU time per request of the target, the load generator
	// and the DynamoDB server (RunLoad).
	CPU *CPU `json:"cpu_per_request,omitempty"`
}

// CreateBody is the create request every load run sends.
var CreateBody = []byte(`{"filename":"photo.jpg","contentType":"image/jpeg","size":48213,"sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`)

// Load sends count POST /uploads to api with concurrency workers; keyFor
// gives the i-th request's Idempotency-Key. A request counts as an error
// unless answered 201.
func Load(ctx context.Context, client *http.Client, api string, concurrency, count int, keyFor func(i int) string) (LoadResult, error) {
	latencies := make([]time.Duration, count)
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= count || ctx.Err() != nil {
					return
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/uploads", bytes.NewReader(CreateBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", keyFor(i))
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				latencies[i] = time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusCreated {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return LoadResult{}, err
	}
	elapsed := time.Since(start)
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	return LoadResult{
		Concurrency: concurrency, Requests: count, Errors: int(errs.Load()),
		RPS: float64(count) / elapsed.Seconds(), P50ms: pct(0.50), P99ms: pct(0.99),
	}, nil
}

// FreshKeys gives every request its own key (a fresh create each).
func FreshKeys(run string) func(int) string {
	return func(i int) string { return fmt.Sprintf("bench-%s-%08d", run, i) }
}

// ReplayKeys cycles over n keys created beforehand (a replay each).
func ReplayKeys(run string, n int) func(int) string {
	return func(i int) string { return fmt.Sprintf("bench-%s-%08d", run, i%n) }
}
