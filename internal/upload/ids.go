package upload

import (
	"encoding/hex"
	"fmt"
	"io"

	"github.com/onceupload/onceupload/pkg/idempotency"
)

// UploadIDLen is the length of an upload id: the 32-hex idempotency.ID of
// its (tenant, key) followed by 32 random hex characters.
//
// Carrying the ID lets finalize and status reach the record with one
// GetItem or UpdateItem (no index, no scan); the random half makes every
// claim's id unique, so a key claimed again after expiry gets a new id and
// object, and a late event for the old id cannot touch the new claim. As
// object keys start with a hash, S3 request rates spread over prefixes.
const UploadIDLen = idempotency.IDLen + 32

func newUploadID(id idempotency.ID, random io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", fmt.Errorf("new upload id: %w", err)
	}
	return string(id) + hex.EncodeToString(b[:]), nil
}

// ParseUploadID checks an upload id and returns the record it belongs to.
func ParseUploadID(s string) (idempotency.ID, error) {
	if len(s) != UploadIDLen {
		return "", fmt.Errorf("upload id %q: want %d hex characters", s, UploadIDLen)
	}
	// Both halves have an ID's shape: 32 lower-case hex characters.
	id, err := idempotency.ParseID(s[:idempotency.IDLen])
	if _, errRandom := idempotency.ParseID(s[idempotency.IDLen:]); err != nil || errRandom != nil {
		return "", fmt.Errorf("upload id %q: want %d lower-case hex characters", s, UploadIDLen)
	}
	return id, nil
}
