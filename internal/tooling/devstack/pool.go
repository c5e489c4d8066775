package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultConcurrency is how many instances of one function the local stack
// runs at most at the same time; further invocations wait for a free one.
const DefaultConcurrency = 32

// functionPool invokes a function as Lambda does: each instance serves one
// invocation at a time, and new instances start while every existing one is
// busy, up to a limit.
//
// One instance must never serve two invocations at once. aws-lambda-go's
// handler returns bytes from a buffer that it hands back to its own pool
// before the caller has read them, and the Runtime Interface Emulator
// crashes on overlapping calls; Lambda never overlaps calls to one process,
// so neither shows there. The answer is copied before its instance serves
// again.
type functionPool struct {
	name  string
	start func(ctx context.Context) (Invoker, error)
	idle  chan Invoker  // instances waiting for work
	slots chan struct{} // one token per instance that exists
}

func newFunctionPool(name string, concurrency int, start func(ctx context.Context) (Invoker, error)) *functionPool {
	if concurrency < 1 {
		concurrency = 1
	}
	return &functionPool{name: name, start: start, idle: make(chan Invoker, concurrency), slots: make(chan struct{}, concurrency)}
}

// Invoke runs payload on an idle instance, or a new one while fewer than the
// limit exist, or waits for one to become idle.
func (p *functionPool) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	inst, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	out, err := inst.Invoke(ctx, payload)
	out = bytes.Clone(out) // before the instance serves again
	var lost *lostInstance
	if errors.As(err, &lost) {
		<-p.slots // retired: a new one may start in its place
		return nil, err
	}
	p.idle <- inst
	return out, err
}

func (p *functionPool) acquire(ctx context.Context) (Invoker, error) {
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	case p.slots <- struct{}{}:
		inst, err := p.start(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, errPoolClosed) {
			// Once more: an instance picks free ports as it starts, and on a
			// busy machine another process can take one first. Lambda starts
			// instances without such races, so a request never sees one.
			inst, err = p.start(ctx)
		}
		if err != nil {
			<-p.slots
			return nil, fmt.Errorf("start an instance of %s: %w", p.name, err)
		}
		return inst, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for an instance of %s: %w", p.name, ctx.Err())
	}
}

// instances counts the instances started so far.
func (p *functionPool) instances() int { return len(p.slots) }

// errPoolClosed is returned by instance starters once the stack is closing.
var errPoolClosed = errors.New("the local stack is closing")

// procList is the stack's child processes, appended to by instance starters
// while requests are served.
type procList struct {
	mu     sync.Mutex
	closed bool
	procs  []stoppable
}

type stoppable interface{ Stop() error }

func (l *procList) add(p stoppable) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = p.Stop()
		return errPoolClosed
	}
	l.procs = append(l.procs, p)
	return nil
}

// stopAll stops every process, the last started first, and refuses new ones.
func (l *procList) stopAll() {
	l.mu.Lock()
	l.closed = true
	procs := l.procs
	l.procs = nil
	l.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		_ = procs[i].Stop()
	}
}

// warm starts one instance now, if none exists, and leaves it idle.
func (p *functionPool) warm(ctx context.Context) error {
	inst, err := p.acquire(ctx)
	if err != nil {
		return err
	}
	p.idle <- inst
	return nil
}
