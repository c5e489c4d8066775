package awslite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// DynamoDB sends DynamoDB operations in its JSON protocol (version
// 2012-08-10). Requests and responses are the caller's own types, encoded
// with encoding/json under the protocol's member names; AttributeValue is
// the protocol's attribute value.
type DynamoDB struct{ c *client }

// NewDynamoDB returns a client for cfg's region, credentials, HTTP client
// and retryer. Without a retryer of cfg's own it retries as the SDK's
// DynamoDB client does: the standard retryer with 4 attempts and a 25 ms
// base delay.
func NewDynamoDB(cfg aws.Config, optFns ...func(*Options)) (*DynamoDB, error) {
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	c, err := newClient(cfg, "DynamoDB", "dynamodb", func(so *retry.StandardOptions) {
		so.MaxAttempts = 4
		so.BaseDelay = 25 * time.Millisecond
	}, o)
	if err != nil {
		return nil, err
	}
	return &DynamoDB{c: c}, nil
}

// invoke sends operation op ("PutItem", "GetItem", …) with in as its JSON
// request and decodes the response into out, unless out is nil. A service
// error is an *Error (inside a *smithy.OperationError) whose Code is the
// exception's name, "ConditionalCheckFailedException" say.
func (d *DynamoDB) invoke(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return d.c.opError(op, fmt.Errorf("encode request: %w", err))
	}
	cl := &call{
		op: op, method: http.MethodPost, url: d.c.endpoint, body: body,
		header: http.Header{
			"Content-Type": {"application/x-amz-json-1.0"},
			"X-Amz-Target": {"DynamoDB_20120810." + op},
			// The CRC32 DynamoDB sends is of the body as sent; asking
			// for it uncompressed keeps the check possible, as the SDK does.
			"Accept-Encoding": {"identity"},
		},
		failed:        checkCRC32,
		errorResponse: dynamoError,
	}
	cl.url.Path += "/"
	resp, err := d.c.do(ctx, cl)
	if err != nil {
		return err
	}
	if out != nil {
		if err := json.Unmarshal(resp.body, out); err != nil {
			return d.c.opError(op, fmt.Errorf("decode response: %w", err))
		}
	}
	return nil
}

// checkCRC32 compares the body with the CRC32 DynamoDB sends with every
// response. A mismatch is a corrupted transfer: the SDK logs it, this
// client retries it (see checksumError).
func checkCRC32(resp *http.Response, body []byte) error {
	want := resp.Header.Get("X-Amz-Crc32")
	if want == "" {
		return nil
	}
	n, err := strconv.ParseUint(want, 10, 32)
	if err != nil {
		return &checksumError{msg: fmt.Sprintf("invalid X-Amz-Crc32 %q", want)}
	}
	if got := crc32.ChecksumIEEE(body); uint32(n) != got {
		return &checksumError{msg: fmt.Sprintf("response CRC32 %d, header says %d", got, n)}
	}
	return nil
}

func dynamoError(resp *http.Response, body []byte) error {
	if err := checkCRC32(resp, body); err != nil {
		return err
	}
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Amzn-Requestid"), Body: body}
	var wire struct {
		Type     string `json:"__type"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(body, &wire) // an unreadable body keeps the status as its code
	code := wire.Type
	if code == "" {
		code = resp.Header.Get("X-Amzn-Errortype")
	}
	code, _, _ = strings.Cut(code, ":") // "Code:http://…" in the header form
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	if code == "" {
		code = http.StatusText(resp.StatusCode)
	}
	e.Code, e.Message = code, wire.Message
	if e.Message == "" {
		e.Message = wire.MessageU
	}
	return e
}

// ConditionalCheckFailed reports whether err is DynamoDB's
// ConditionalCheckFailedException and returns the item it carries (the
// item as it was, for a request with ReturnValuesOnConditionCheckFailure
// ALL_OLD), which is nil when the server sent none.
func ConditionalCheckFailed(err error) (item map[string]AttributeValue, ok bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != "ConditionalCheckFailedException" {
		return nil, false
	}
	var wire struct {
		Item map[string]AttributeValue `json:"Item"`
	}
	if json.Unmarshal(e.Body, &wire) != nil {
		return nil, true
	}
	return wire.Item, true
}

// AttributeValue is a DynamoDB attribute value as the JSON protocol writes
// it: exactly one field is set. S and N build the common ones.
type AttributeValue struct {
	S    *string                   `json:"S,omitzero"`
	N    *string                   `json:"N,omitzero"` // the number's decimal text
	B    []byte                    `json:"B,omitzero"`
	BOOL *bool                     `json:"BOOL,omitzero"`
	NULL *bool                     `json:"NULL,omitzero"`
	M    map[string]AttributeValue `json:"M,omitzero"` // an empty, non-nil map is written as {}
	L    []AttributeValue          `json:"L,omitzero"`
	SS   []string                  `json:"SS,omitzero"`
	NS   []string                  `json:"NS,omitzero"`
	BS   [][]byte                  `json:"BS,omitzero"`
}

// S returns a string value.
func S(v string) AttributeValue { return AttributeValue{S: &v} }

// N returns a number value.
func N(v int64) AttributeValue {
	s := strconv.FormatInt(v, 10)
	return AttributeValue{N: &s}
}

// AsString returns the value of an S attribute.
func (a AttributeValue) AsString() (string, bool) {
	if a.S == nil {
		return "", false
	}
	return *a.S, true
}

// AsInt returns the value of an N attribute that holds an integer.
func (a AttributeValue) AsInt() (int64, error) {
	if a.N == nil {
		return 0, errors.New("not a number")
	}
	return strconv.ParseInt(*a.N, 10, 64)
}
