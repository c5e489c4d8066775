// Package callcount counts the HTTP attempts AWS clients send: the SDK's,
// with a middleware added after the retry step, and package awslite's,
// with its OnAttempt hook. Every attempt, retries included, counts as the
// round trip it is. Tests and benchmarks count by operation to hold the
// round-trip budget; the functions count each request's calls by service
// for its log line (WithScope, CountInScope).
package callcount

import (
	"context"
	"maps"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts calls by operation name ("PutItem", "HeadObject", …).
type Counter struct {
	mu  sync.Mutex
	ops map[string]int
}

// Total returns the number of attempts sent so far.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.ops {
		n += v
	}
	return n
}

// Ops returns a copy of the counts by operation.
func (c *Counter) Ops() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.ops)
	if out == nil {
		out = map[string]int{}
	}
	return out
}

// Reset sets every count back to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.ops)
}

// Count counts one attempt of operation; it is an awslite Options.OnAttempt.
func (c *Counter) Count(_ context.Context, _, operation string) {
	c.add(operation)
}

func (c *Counter) add(name string) {
	c.mu.Lock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[name]++
	c.mu.Unlock()
}

// Middleware adds the counting step to a client's stack; use it in
// Options.APIOptions or config.WithAPIOptions.
func (c *Counter) Middleware(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("callcount",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.add(awsmiddleware.GetOperationName(ctx))
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

type scopeKey struct{}

// WithScope returns ctx carrying a new Counter that CountInScope fills
// with the calls made with ctx, by service ("DynamoDB", "S3"): the round
// trips one request cost, for its log line.
func WithScope(ctx context.Context) (context.Context, *Counter) {
	c := &Counter{}
	return context.WithValue(ctx, scopeKey{}, c), c
}

// CountInScope counts an attempt of service in the Counter of ctx, if it
// has one; it is the awslite Options.OnAttempt of the functions' clients.
func CountInScope(ctx context.Context, service, _ string) {
	if c, ok := ctx.Value(scopeKey{}).(*Counter); ok {
		c.add(service)
	}
}
