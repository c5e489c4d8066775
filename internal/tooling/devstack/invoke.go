package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Invoker runs one function invocation: a JSON event in, a JSON result
// out. lambda.Handler (in-process) and the emulator both fit.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// withContext invokes with the context that its function makes of the
// caller's (Config.InvocationContext).
type withContext struct {
	Invoker
	context func(context.Context) context.Context
}

func (w withContext) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return w.Invoker.Invoke(w.context(ctx), payload)
}

// rieInvoker calls one instance of a function under the Runtime Interface
// Emulator. Overlapping calls crash the emulator; functionPool never makes
// them.
type rieInvoker struct {
	url  string
	proc stoppable
}

// lostInstance is an invocation that reached no working instance (the
// emulator died or refused): the pool retires that instance.
type lostInstance struct{ err error }

func (e *lostInstance) Error() string { return e.err.Error() }
func (e *lostInstance) Unwrap() error { return e.err }

func (r *rieInvoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// Dead, or (the caller gave up) possibly still at work on this
		// invocation: either way it must not serve another, so it retires.
		_ = r.proc.Stop()
		return nil, fmt.Errorf("invoke: %w", &lostInstance{err})
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" ||
		json.Unmarshal(out, &fnErr) == nil && fnErr.ErrorType != "" {
		return nil, fmt.Errorf("invoke: status %d: %s", resp.StatusCode, out)
	}
	return out, nil
}
