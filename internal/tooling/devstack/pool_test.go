package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

type echoEvent struct {
	Caller int    `json:"caller"`
	Seq    int    `json:"seq"`
	Pad    string `json:"pad"`
}

// Many goroutines call one function through the pool, each with its own
// requests; every answer must be the echo of its own request. aws-lambda-go's
// handler, called from several goroutines at once as the front door used to,
// returns bytes that another invocation overwrites: this test failed within
// its first thousand calls that way.
func TestPoolKeepsEachAnswerWithItsRequest(t *testing.T) {
	t.Parallel()
	echo := func(_ context.Context, ev echoEvent) (echoEvent, error) { return ev, nil }
	pool := newFunctionPool("echo", 8, func(context.Context) (Invoker, error) { return lambda.NewHandler(echo), nil })

	const callers, calls = 16, 4000
	var wrong atomic.Int64
	var first sync.Once
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				// Lengths differ per caller so a swapped buffer also shows
				// as a torn or mis-sized answer.
				want := echoEvent{Caller: c, Seq: i, Pad: strings.Repeat("x", c*7+i%13)}
				payload, _ := json.Marshal(want)
				out, err := pool.Invoke(context.Background(), payload)
				var got echoEvent
				if err == nil {
					err = json.Unmarshal(out, &got)
				}
				if err != nil || got != want {
					wrong.Add(1)
					first.Do(func() { t.Errorf("caller %d call %d: got %s (%v), want its own echo", c, i, out, err) })
				}
			}
		})
	}
	wg.Wait()
	if n := wrong.Load(); n > 0 {
		t.Fatalf("%d of %d answers were not their request's", n, callers*calls)
	}
	if n := pool.instances(); n < 2 || n > 8 {
		t.Errorf("instances started: %d, want between 2 and the limit 8 under %d callers", n, callers)
	}
}

// An instance serves one invocation at a time, and the pool never starts
// more instances than its limit.
func TestPoolOneInvocationPerInstance(t *testing.T) {
	t.Parallel()
	var started atomic.Int64
	release := make(chan struct{})
	pool := newFunctionPool("busy", 3, func(context.Context) (Invoker, error) {
		started.Add(1)
		return &exclusiveInvoker{release: release}, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			if _, err := pool.Invoke(context.Background(), []byte(`{}`)); err != nil {
				errs <- err
			}
		})
	}
	// Nothing answers until three instances are busy: the limit.
	for deadline := time.Now().Add(5 * time.Second); started.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for range 10 {
		release <- struct{}{}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := started.Load(); n != 3 {
		t.Errorf("instances started: %d, want the limit 3 under 10 waiting calls", n)
	}
}

// exclusiveInvoker fails if it is invoked while already busy, and answers
// when released.
type exclusiveInvoker struct {
	busy    atomic.Bool
	release chan struct{}
}

func (e *exclusiveInvoker) Invoke(context.Context, []byte) ([]byte, error) {
	if !e.busy.CompareAndSwap(false, true) {
		return nil, errors.New("two invocations overlapped on one instance")
	}
	defer e.busy.Store(false)
	<-e.release
	return []byte(`{}`), nil
}

// A caller that gives up while every instance is busy gets its context's
// error, and a failed start frees its slot.
func TestPoolWaitAndStartFailure(t *testing.T) {
	t.Parallel()
	fail := true
	pool := newFunctionPool("flaky", 1, func(context.Context) (Invoker, error) {
		if fail {
			return nil, fmt.Errorf("no bootstrap")
		}
		return lambda.NewHandler(func() (string, error) { return "ok", nil }), nil
	})
	if _, err := pool.Invoke(context.Background(), []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no bootstrap") {
		t.Fatalf("failed start: %v", err)
	}
	fail = false
	if out, err := pool.Invoke(context.Background(), []byte(`{}`)); err != nil || string(out) != `"ok"` {
		t.Fatalf("after a failed start: %s %v", out, err)
	}
	// Hold the only instance, then ask with a cancelled context.
	inst, err := pool.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pool.Invoke(ctx, []byte(`{}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("busy pool, cancelled caller: %v", err)
	}
	pool.idle <- inst
}

// An instance that died is retired, and the next invocation starts another
// in its place rather than waiting for the dead one.
func TestPoolRetiresLostInstances(t *testing.T) {
	t.Parallel()
	started := 0
	pool := newFunctionPool("dying", 1, func(context.Context) (Invoker, error) {
		started++
		n := started
		return invokerFunc(func() ([]byte, error) {
			if n == 1 {
				return nil, &lostInstance{errors.New("connection refused")}
			}
			return []byte(`"ok"`), nil
		}), nil
	})
	if _, err := pool.Invoke(context.Background(), []byte(`{}`)); err == nil {
		t.Fatal("the dead instance's invocation succeeded")
	}
	if out, err := pool.Invoke(context.Background(), []byte(`{}`)); err != nil || string(out) != `"ok"` || started != 2 {
		t.Fatalf("after a lost instance: %s %v, %d started", out, err, started)
	}
}

type invokerFunc func() ([]byte, error)

func (f invokerFunc) Invoke(context.Context, []byte) ([]byte, error) { return f() }

// An instance that fails to start (another process took the port it
// picked) is started once more, so the request it was for is served; a
// second failure is the request's error.
func TestPoolStartsAFailedInstanceOnceMore(t *testing.T) {
	echo := func(_ context.Context, ev echoEvent) (echoEvent, error) { return ev, nil }
	for _, c := range []struct {
		failures, starts int
		ok               bool
	}{{0, 1, true}, {1, 2, true}, {2, 2, false}} {
		var starts int
		pool := newFunctionPool("echo", 2, func(context.Context) (Invoker, error) {
			starts++
			if starts <= c.failures {
				return nil, errors.New("listen tcp 127.0.0.1:40000: bind: address already in use")
			}
			return lambda.NewHandler(echo), nil
		})
		_, err := pool.Invoke(context.Background(), []byte(`{"caller":1}`))
		if (err == nil) != c.ok || starts != c.starts {
			t.Errorf("%d failed starts: %d starts, error %v; want %d starts, served %v", c.failures, starts, err, c.starts, c.ok)
		}
		if !c.ok && pool.instances() != 0 {
			t.Errorf("%d failed starts: %d instances counted, want 0", c.failures, pool.instances())
		}
	}
}
