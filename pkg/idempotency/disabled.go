package idempotency

import (
	"fmt"
	"os"
	"strings"
)

// DisabledEnv is the environment variable that turns MakeIdempotent (and
// every wrapper built on it) off, as it turns off Powertools' idempotency:
// for unit tests and local runs. MakeIdempotent reads it on every request,
// as Powertools for Python does; when it is true, the request runs the
// handler and nothing else (no key, no store call, no local cache), and
// the wrapper's Logger gets one warning per wrapped handler.
//
// Its values are Powertools': case-insensitive, surrounding white space
// ignored, 1, y, yes, t, true and on are true; 0, n, no, f, false and off
// are false, and so is an empty or unset variable. Any other value fails
// every request with an error naming the variable and runs nothing (both
// Powertools refuse such a value too), so that a typo neither disables
// idempotency nor leaves it on unnoticed.
//
// It never touches a Store used directly, such as the upload service's.
const DisabledEnv = "POWERTOOLS_IDEMPOTENCY_DISABLED"

// disabled reads DisabledEnv.
func disabled() (bool, error) {
	v := os.Getenv(DisabledEnv)
	if v == "" {
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "y", "yes", "t", "true", "on":
		return true, nil
	case "", "0", "n", "no", "f", "false", "off":
		return false, nil
	}
	return false, fmt.Errorf("idempotency: %s=%q is neither true (1, y, yes, t, true, on) nor false (0, n, no, f, false, off)", DisabledEnv, v)
}
