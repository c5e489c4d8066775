package client

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"

	"github.com/onceupload/onceupload/pkg/api"
)

// How Upload cuts large files.
const (
	// MultipartThreshold is the size from which Upload sends a file in
	// parts (unless UploadInput.PartSize says otherwise). Below it one PUT
	// is as fast and costs fewer requests.
	MultipartThreshold = 64 << 20
	// MinAutoPartSize is the smallest part size Upload picks by itself:
	// large enough that per-part requests cost little, small enough that a
	// lost part costs little to send again.
	MinAutoPartSize = 8 << 20
	// DefaultParallel is how many parts Upload sends at once.
	DefaultParallel = 4
)

// PartSizeFor is the part size Upload picks for a file of size bytes: 0 (one
// PUT) below MultipartThreshold, else max(MinAutoPartSize,
// ceil(size/MaxParts)) rounded up to a whole MiB, so that a file of up to
// S3's largest object fits in at most 10,000 parts.
func PartSizeFor(size int64) int64 {
	if size < MultipartThreshold {
		return 0
	}
	const mib = 1 << 20
	ps := max(MinAutoPartSize, (size+api.MaxParts-1)/api.MaxParts)
	return (ps + mib - 1) / mib * mib
}

// hashBufSize is the read size of hashPart: one buffer a hasher is all
// the memory hashing takes, whatever the file's size.
const hashBufSize = 1 << 20

// partPlan is an upload in parts as Upload sends it: its cut, and each
// part's SHA-256 (lower-case hex) once known, from hashing the part just
// before it is sent or, for a part S3 held already, from checking it
// against the file.
type partPlan struct {
	size, partSize int64
	sums           []string // sums[i] is part i+1's; "" while not known
}

func newPartPlan(size, partSize int64) *partPlan {
	return &partPlan{size: size, partSize: partSize, sums: make([]string, api.PartCount(size, partSize))}
}

// length is the length of part n (1-based).
func (p *partPlan) length(n int) int64 { return api.PartLength(p.size, p.partSize, n) }

// offset is where part n (1-based) starts.
func (p *partPlan) offset(n int) int64 { return int64(n-1) * p.partSize }

// declared is every part's SHA-256 in the signing shape, for Complete.
func (p *partPlan) declared() []api.PartToSign {
	out := make([]api.PartToSign, len(p.sums))
	for i, s := range p.sums {
		out[i] = api.PartToSign{PartNumber: i + 1, SHA256: s}
	}
	return out
}

// numbers are the part numbers of p, 1 to its count.
func (p *partPlan) numbers() []int {
	out := make([]int, len(p.sums))
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// composite is S3's composite SHA-256 of the parts of p, whose SHA-256s
// must all be known: base64 of the SHA-256 of their raw digests in order,
// "-", their count (as api.Upload.CompositeSHA256 states it). A part whose
// SHA-256 is not known (or not hex) makes it "".
func (p *partPlan) composite() string {
	h := sha256.New()
	for _, s := range p.sums {
		sum, err := hex.DecodeString(s)
		if err != nil || len(sum) != sha256.Size {
			return ""
		}
		h.Write(sum)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(p.sums))
}

// hashPart returns the SHA-256 (hex) of part n of p as r holds it, read
// with buf (any size) through ReadAt, so parts are hashed independently
// of each other and of the reads that send them. ctx is checked between
// reads: a part may be GiBs, and an interrupt should not wait for all of
// it to be hashed.
func hashPart(ctx context.Context, r io.ReaderAt, p *partPlan, n int, buf []byte) (string, error) {
	h := sha256.New()
	off, left := p.offset(n), p.length(n)
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return "", context.Cause(ctx)
		}
		k, err := r.ReadAt(buf[:min(int64(len(buf)), left)], off)
		h.Write(buf[:k])
		off += int64(k)
		left -= int64(k)
		if left > 0 && k == 0 && err == nil {
			err = io.ErrNoProgress // a ReaderAt that breaks its contract
		}
		if left > 0 && err != nil {
			if err == io.EOF {
				return "", fmt.Errorf("part %d: %d bytes to upload, but only %d could be read", n, p.size, off)
			}
			return "", fmt.Errorf("part %d: %w", n, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
