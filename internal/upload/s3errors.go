package upload

import (
	"errors"

	"github.com/aws/smithy-go"
)

func isNoSuchUpload(err error) bool { return apiErrorCode(err) == "NoSuchUpload" }

// isNotFound reports S3's answer for an object that is not there: a HEAD
// has no body, so its code comes from the status.
func isNotFound(err error) bool {
	code := apiErrorCode(err)
	return code == "NotFound" || code == "NoSuchKey"
}

func apiErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
