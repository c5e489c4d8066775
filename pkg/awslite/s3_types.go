package awslite

import "time"

// The S3 operations' requests and answers, with the members the upload
// service uses. They are this package's own rather than the SDK's: the
// SDK's live in package s3, whose import alone links its endpoint tables
// and their regular expressions into a binary. Names follow S3's; an empty
// string or zero leaves a member out.

// ChecksumSHA256Algorithm is the ChecksumAlgorithm value for SHA-256.
const ChecksumSHA256Algorithm = "SHA256"

// HeadObjectInput is HeadObject's request.
type HeadObjectInput struct {
	Bucket, Key string
	// ChecksumMode true asks for the object's checksums
	// (x-amz-checksum-mode: ENABLED).
	ChecksumMode bool
	IfMatch      string
}

// HeadObjectOutput is what HeadObject reads of an object.
type HeadObjectOutput struct {
	ContentLength int64
	ContentType   string
	ETag          string    // quoted, as S3 sends it
	LastModified  time.Time // zero if S3 sent none
	// ChecksumSHA256 is base64, for a multipart object the checksum of its
	// parts' checksums followed by "-N" (ChecksumType "COMPOSITE").
	ChecksumSHA256 string
	ChecksumType   string
	Metadata       map[string]string // x-amz-meta-*, names in lower case
}

// DeleteObjectInput is DeleteObject's request.
type DeleteObjectInput struct {
	Bucket, Key string
	// IfMatch deletes only the object with this ETag (quoted); another
	// answers PreconditionFailed.
	IfMatch string
}

// CreateMultipartUploadInput is CreateMultipartUpload's request.
type CreateMultipartUploadInput struct {
	Bucket, Key string
	ContentType string
	// ChecksumAlgorithm ChecksumSHA256Algorithm makes every part carry its
	// SHA-256, which S3 checks, and Complete list them.
	ChecksumAlgorithm string
}

// CreateMultipartUploadOutput is CreateMultipartUpload's answer.
type CreateMultipartUploadOutput struct {
	UploadID string
}

// ListPartsInput is ListParts' request: one page.
type ListPartsInput struct {
	Bucket, Key, UploadID string
	MaxParts              int32  // 0: S3's default, 1,000
	PartNumberMarker      string // list the parts after this one
}

// ListPartsOutput is one page of parts.
type ListPartsOutput struct {
	Parts                []Part
	IsTruncated          bool
	NextPartNumberMarker string
}

// Part is a part S3 holds.
type Part struct {
	PartNumber     int32
	Size           int64
	ETag           string // quoted
	ChecksumSHA256 string // base64
	LastModified   time.Time
}

// CompleteMultipartUploadInput is CompleteMultipartUpload's request.
type CompleteMultipartUploadInput struct {
	Bucket, Key, UploadID string
	Parts                 []CompletedPart
	// MpuObjectSize, if not 0, is the size the object must have.
	MpuObjectSize int64
	// IfNoneMatch "*" completes only if no object has the key.
	IfNoneMatch string
}

// CompletedPart is a part a Complete names.
type CompletedPart struct {
	PartNumber     int32
	ETag           string
	ChecksumSHA256 string
}

// CompleteMultipartUploadOutput is CompleteMultipartUpload's answer.
type CompleteMultipartUploadOutput struct {
	Location       string
	ETag           string // quoted
	ChecksumSHA256 string
	ChecksumType   string
}

// AbortMultipartUploadInput is AbortMultipartUpload's request.
type AbortMultipartUploadInput struct {
	Bucket, Key, UploadID string
}
