// Package telemetry writes one line per request (and per S3 record): a
// structured log line that is also a CloudWatch Embedded Metric Format
// document, so that CloudWatch turns it into metrics with no extra call and
// no extra SDK client.
//
// The metrics are Requests (a count) and Latency (milliseconds), with the
// low-cardinality dimensions Function and Outcome. The line also carries
// the route, the request id, the latency and the DynamoDB and S3 calls
// made, as log fields; never a tenant, key, filename or URL, which may be
// personal data or carry credentials.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/onceupload/onceupload/internal/callcount"
)

// Outcomes a line reports.
const (
	OutcomeCreated     = "created"     // a create claimed its key
	OutcomeReplayed    = "replayed"    // a create answered from the record
	OutcomeInProgress  = "in_progress" // 409: the key's claim is mid-flight
	OutcomeKeyReuse    = "key_reuse"   // 422
	OutcomeInvalid     = "invalid"     // any other 4xx
	OutcomeLimited     = "limited"     // 429: a tenant's cap refused a create
	OutcomeServed      = "served"      // status, sign, list, complete, abort
	OutcomeHealed      = "healed"      // a status completed a record from S3
	OutcomeUnavailable = "unavailable" // 503: a dependency failed or hung
	OutcomeError       = "error"       // 500
	OutcomeCompleted   = "completed"   // finalize recorded an object
	OutcomeDuplicate   = "duplicate"   // finalize: already recorded
	OutcomeSkipped     = "skipped"     // finalize: not an upload, no claim
	OutcomeMismatch    = "mismatch"    // finalize: wrong size, removed
)

// DefaultNamespace is the CloudWatch namespace when none is configured.
const DefaultNamespace = "onceupload"

// Recorder writes the lines of one function.
type Recorder struct {
	// Logger receives the lines (in Lambda, a JSON logger on stdout).
	Logger *slog.Logger
	// Namespace is the CloudWatch namespace. Defaults to DefaultNamespace.
	Namespace string
	// Function names the function in the Function dimension ("presign").
	Function string
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Start begins a request: the returned context counts the DynamoDB and S3
// calls made with it (the clients must have callcount.ScopeAPIOptions in
// their APIOptions, as wiring.Service's do).
func (r *Recorder) Start(ctx context.Context) (context.Context, *Request) {
	ctx, calls := callcount.WithScope(ctx)
	return ctx, &Request{r: r, started: r.now(), calls: calls}
}

func (r *Recorder) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Request is one request being measured.
type Request struct {
	r       *Recorder
	started time.Time
	calls   *callcount.Counter
}

// Done writes the request's line with its outcome, route (or event kind)
// and request id.
func (q *Request) Done(ctx context.Context, outcome, route, requestID string) {
	r := q.r
	now := r.now()
	latency := float64(now.Sub(q.started).Microseconds()) / 1000
	ns := r.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	calls := q.calls.Ops()
	level := slog.LevelInfo
	if outcome == OutcomeError || outcome == OutcomeMismatch {
		level = slog.LevelError
	}
	r.Logger.LogAttrs(ctx, level, "request",
		slog.Any("_aws", emfMetadata{
			Timestamp: now.UnixMilli(),
			CloudWatchMetrics: []emfDirective{{
				Namespace:  ns,
				Dimensions: emfDimensions,
				Metrics:    emfMetrics,
			}},
		}),
		slog.String("Function", r.Function),
		slog.String("Outcome", outcome),
		slog.Int("Requests", 1),
		slog.Float64("Latency", latency),
		slog.String("route", route),
		slog.String("request_id", requestID),
		slog.Int("dynamodb_calls", calls["DynamoDB"]),
		slog.Int("s3_calls", calls["S3"]),
	)
}

// The EMF metadata object, "_aws" (CloudWatch's specification of the
// embedded metric format).
type emfMetadata struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// The directive's fixed parts, the same on every line.
var (
	emfDimensions = [][]string{{"Function", "Outcome"}}
	emfMetrics    = []emfMetric{{Name: "Requests", Unit: "Count"}, {Name: "Latency", Unit: "Milliseconds"}}
)

// Tally counts the lines passing through a logger by function and outcome,
// for a live view of the metrics on a local run (make dev).
type Tally struct {
	mu     sync.Mutex
	counts map[string]int64
	lines  int64
}

// Handler wraps next so that the lines it handles are counted.
func (t *Tally) Handler(next slog.Handler) slog.Handler { return &tallyHandler{next, t} }

// String is the tally, "presign created=3 replayed=1, finalize completed=3",
// and how many lines it counts.
func (t *Tally) String() (string, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.Sorted(maps.Keys(t.counts))
	var b strings.Builder
	last := ""
	for _, k := range keys {
		fn, outcome, _ := strings.Cut(k, " ")
		switch {
		case fn != last && last != "":
			fmt.Fprintf(&b, ", %s", fn)
		case fn != last:
			b.WriteString(fn)
		}
		last = fn
		fmt.Fprintf(&b, " %s=%d", outcome, t.counts[k])
	}
	return b.String(), t.lines
}

type tallyHandler struct {
	slog.Handler
	t *Tally
}

func (h *tallyHandler) Handle(ctx context.Context, rec slog.Record) error {
	var fn, outcome string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "Function":
			fn = a.Value.String()
		case "Outcome":
			outcome = a.Value.String()
		}
		return true
	})
	if fn != "" && outcome != "" {
		h.t.mu.Lock()
		if h.t.counts == nil {
			h.t.counts = map[string]int64{}
		}
		h.t.counts[fn+" "+outcome]++
		h.t.lines++
		h.t.mu.Unlock()
	}
	return h.Handler.Handle(ctx, rec)
}

func (h *tallyHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &tallyHandler{h.Handler.WithAttrs(attrs), h.t}
}

func (h *tallyHandler) WithGroup(name string) slog.Handler {
	return &tallyHandler{h.Handler.WithGroup(name), h.t}
}
