package upload

import (
	"errors"

	"github.com/aws/smithy-go"
)

// isNoSuchUpload reports S3's answer for a multipart upload that is gone:
// completed or aborted.
func isNoSuchUpload(err error) bool { return apiErrorCode(err) == "NoSuchUpload" }

// isNoSuchKey reports S3's answer for an object that is not there: a HEAD
// has no body, so its code comes from the status.
func isNoSuchKey(err error) bool {
	code := apiErrorCode(err)
	return code == "NotFound" || code == "NoSuchKey"
}

// apiErrorCode is the code of an S3 error answer, "" for any other error.
func apiErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
