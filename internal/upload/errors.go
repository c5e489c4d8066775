package upload

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/onceupload/onceupload/pkg/api"
)

// Errors of the service. A refusal of a request's values is an
// *api.RequestError (its code, the member, a message for the client), as
// the decoders' refusals are; the others are conditions of the upload,
// which the handler answers in its own words.
var (
	// ErrFileTooLarge is api.ErrFileTooLarge: the decoder refuses a size
	// beyond any deployment's with it.
	ErrFileTooLarge = api.ErrFileTooLarge
	ErrNeedsParts   = &api.RequestError{Code: api.CodeFileTooLarge, Field: "size",
		Message: "size is larger than S3 accepts in one PUT (5 GiB); send partSize to upload it in parts."}
	ErrUnsupportedMedia = &api.RequestError{Code: api.CodeUnsupportedMediaType, Field: "contentType",
		Message: "contentType is not allowed by this deployment."}
	ErrNotFound = errors.New("no such upload")
	// ErrNotPending: the upload is completed or aborted; its parts can no
	// longer be signed, listed or completed.
	ErrNotPending = errors.New("the upload is no longer pending")
	// ErrCompleted: an abort of an upload that is already completed.
	ErrCompleted = errors.New("the upload is completed and cannot be aborted")
)

// PartsMissingError is a complete of a multipart upload that S3 does not
// hold every part of (or holds one of the wrong size).
type PartsMissingError struct {
	// Missing lists the first part numbers missing (at most ten).
	Missing []int
	// Count is how many parts are missing in all.
	Count int
}

func (e *PartsMissingError) Error() string {
	return "parts missing or of the wrong size: " + e.Parts()
}

// Parts names the missing parts for people: "3, 7" or "1, 2, … 10 and 5
// more".
func (e *PartsMissingError) Parts() string { return partNumbers(e.Missing, e.Count) }

// PartsMismatchError is a complete whose declared part SHA-256s differ
// from what S3 holds for those parts: the parts stored are not the file's
// the client means (a key reused for another file, or a file that changed
// between its parts). Nothing was completed; the client may send the right
// bytes of these parts again (sign them anew) and complete again.
type PartsMismatchError struct {
	// Mismatched lists the first part numbers that differ (at most ten).
	Mismatched []int
	// Count is how many parts differ in all.
	Count int
}

func (e *PartsMismatchError) Error() string {
	return "parts whose SHA-256 in S3 is not the declared one: " + e.Parts()
}

// Parts names the parts that differ for people, as PartsMissingError.Parts.
func (e *PartsMismatchError) Parts() string { return partNumbers(e.Mismatched, e.Count) }

// partNumbers renders the first part numbers of a list of count: "3, 7"
// or "1, 2, … 10 and 5 more".
func partNumbers(first []int, count int) string {
	nums := make([]string, len(first))
	for i, n := range first {
		nums[i] = strconv.Itoa(n)
	}
	more := ""
	if count > len(first) {
		more = fmt.Sprintf(" and %d more", count-len(first))
	}
	return strings.Join(nums, ", ") + more
}

// invalid refuses a value of a request: a 400 invalid_request about
// field, with the message for the client that format and args make.
func invalid(field, format string, args ...any) error {
	return &api.RequestError{Code: api.CodeInvalidRequest, Field: field, Message: fmt.Sprintf(format, args...) + "."}
}
