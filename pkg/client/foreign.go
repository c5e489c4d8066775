package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/onceupload/onceupload/pkg/api"
)

// This file tells the API's answers from those of something else at the
// base URL: a wrong path (…/v1), another service (S3, a web server), or API
// Gateway itself (its authorizer, throttling, timeouts).

// ErrNotOnceupload matches (errors.Is) an *Error whose answer did not come
// from an onceupload API: the base URL points somewhere else. The Error's
// Answer says what answered.
var ErrNotOnceupload = errors.New("not a onceupload API")

// knownCodes are the API's error codes (pkg/api).
var knownCodes = map[string]bool{
	api.CodeKeyRequired: true, api.CodeKeyInvalid: true, api.CodeInvalidRequest: true,
	api.CodeUnauthenticated: true, api.CodeNotFound: true, api.CodeInProgress: true,
	api.CodeUploadNotPending: true, api.CodeUploadCompleted: true, api.CodePartsMissing: true,
	api.CodeRequestTooLarge: true, api.CodeFileTooLarge: true, api.CodeUnsupportedMediaType: true,
	api.CodeKeyReuse: true, api.CodeTooManyUploads: true, api.CodeInternal: true, api.CodeUnavailable: true,
}

// apiCodeShape is an error code a newer server may add: lower snake_case.
var apiCodeShape = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// gatewayStatuses are the answers API Gateway gives itself, before the
// API's code runs, with a body {"message": "…"}: its authorizer's 401 and
// 403, throttling's 429, and 500, 502, 503 and 504 when the integration
// failed or timed out.
var gatewayStatuses = map[int]bool{401: true, 403: true, 429: true, 500: true, 502: true, 503: true, 504: true}

// classify sorts a failed API answer: the API's own (an error body with a
// known code, or one shaped like a newer one), API Gateway's (gateway,
// with its message), or neither (foreign).
func classify(resp *http.Response, body []byte) (gateway bool, message string, foreign bool) {
	var e struct {
		Error   *string `json:"error"`
		Message *string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil {
		switch {
		case e.Error != nil && (knownCodes[*e.Error] || e.Message != nil && apiCodeShape.MatchString(*e.Error)):
			return false, "", false
		case e.Error == nil && e.Message != nil && gatewayStatuses[resp.StatusCode]:
			return true, *e.Message, false
		}
	}
	return false, "", true
}

// describeAnswer says what answered: status, Server header, media type and
// the first bytes of the body, on one line.
func describeAnswer(resp *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if s := resp.Header.Get("Server"); s != "" {
		fmt.Fprintf(&b, ", Server: %s", s)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		fmt.Fprintf(&b, ", Content-Type: %s", ct)
	}
	if len(body) > 0 {
		fmt.Fprintf(&b, ", body %q", firstBytes(body, 80))
	}
	return b.String()
}

// firstBytes is up to n bytes of b, on one line, cut at a rune boundary.
func firstBytes(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// unreadable is the error of a 2xx whose body is not the API's JSON: most
// likely not the API at all (a web server's page, say).
func unreadable(op string, resp *http.Response, body []byte, err error) *Error {
	return &Error{Op: op, StatusCode: resp.StatusCode, Message: "unreadable response", Err: err,
		NotOnceupload: true, Answer: describeAnswer(resp, body)}
}
