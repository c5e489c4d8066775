// Package callcount counts the HTTP attempts the SDK's clients send, with a
// middleware added after the retry step, so every attempt, retries
// included, counts as the round trip it is. Tests and benchmarks count by
// operation to hold the round-trip budget (Counter.Middleware); the
// functions count each request's calls by service for its log line
// (WithScope, ScopeAPIOptions).
package callcount

import (
	"context"
	"fmt"
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

func (c *Counter) add(name string) {
	c.mu.Lock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[name]++
	c.mu.Unlock()
}

// Middleware adds the step that counts every attempt by operation to a
// client's stack; use it in Options.APIOptions or config.WithAPIOptions.
func (c *Counter) Middleware(stack *middleware.Stack) error {
	// Each counter's step has an id of its own, so two counters can share a stack.
	return addAttemptStep(stack, fmt.Sprintf("callcount-%p", c), func(ctx context.Context) {
		c.add(awsmiddleware.GetOperationName(ctx))
	})
}

type scopeKey struct{}

// WithScope returns ctx carrying a new Counter that the ScopeAPIOptions
// middleware fills with the calls made with ctx, by service ("DynamoDB",
// "S3"): the round trips one request cost, for its log line.
func WithScope(ctx context.Context) (context.Context, *Counter) {
	c := &Counter{}
	return context.WithValue(ctx, scopeKey{}, c), c
}

// ScopeAPIOptions adds the step that counts every attempt by service in the
// Counter of the request's context, if it has one (WithScope).
func ScopeAPIOptions(stack *middleware.Stack) error {
	return addAttemptStep(stack, "callcount-scope", func(ctx context.Context) {
		if c, ok := ctx.Value(scopeKey{}).(*Counter); ok {
			c.add(awsmiddleware.GetServiceID(ctx))
		}
	})
}

// addAttemptStep runs count once per attempt: the finalize step after the
// retry middleware runs once for every attempt it makes.
func addAttemptStep(stack *middleware.Stack, id string, count func(context.Context)) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			count(ctx)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}
