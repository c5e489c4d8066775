package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/upload"
)

// randomChunk is how many bytes of WriteRandom's file one goroutine
// generates and writes at a time.
const randomChunk = 4 << 20

// WriteRandom writes n pseudo-random bytes (ChaCha8, fresh seeds: nothing
// compresses or repeats) to path, chunks generated and written by one
// goroutine per CPU, so that a file of gigabytes costs seconds.
func WriteRandom(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	const chunk = randomChunk
	var next atomic.Int64
	workers := runtime.NumCPU()
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var seed [32]byte
			_, _ = rand.Read(seed[:])
			rng := mrand.NewChaCha8(seed)
			buf := make([]byte, chunk)
			for {
				off := next.Add(chunk) - chunk
				if off >= n {
					errs <- nil
					return
				}
				b := buf[:min(chunk, n-off)]
				_, _ = rng.Read(b)
				if _, err := f.WriteAt(b, off); err != nil {
					next.Store(n) // the others stop too
					errs <- err
					return
				}
			}
		}()
	}
	for range workers {
		err = errors.Join(err, <-errs)
	}
	return errors.Join(err, f.Close())
}

// Probe is the raw floor of an upload in parts on this S3 server: a
// multipart upload made with the AWS SDK (no API, no idempotency record),
// its parts hashed before the clock starts, each part's PUT presigned with
// its SHA-256 exactly as the product's presign function signs it
// (upload.S3Presigner: x-amz-checksum-sha256 signed, S3 checks it), and
// Parallel PUTs in flight; then CompleteMultipartUpload with the parts'
// checksums. Timed: create, parts, complete.
type Probe struct {
	S3       *s3.Client
	Bucket   string
	File     string
	PartSize int64
	Parallel int
	sums     []string // base64 SHA-256 of each part
	size     int64
}

// Prepare hashes the file's parts (untimed).
func (p *Probe) Prepare() error {
	f, err := os.Open(p.File)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	p.size, p.sums = st.Size(), nil
	for off := int64(0); off < p.size; off += p.PartSize {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, off, min(p.PartSize, p.size-off))); err != nil {
			return err
		}
		p.sums = append(p.sums, base64.StdEncoding.EncodeToString(h.Sum(nil)))
	}
	return nil
}

// Run sends the file once to key and returns the wall time.
func (p *Probe) Run(ctx context.Context, key string) (float64, error) {
	if p.sums == nil {
		if err := p.Prepare(); err != nil {
			return 0, err
		}
	}
	f, err := os.Open(p.File)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	httpc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	presigner := upload.NewPresigner(p.S3, p.Bucket)
	start := time.Now()
	mp, err := p.S3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(p.Bucket), Key: aws.String(key), ContentType: aws.String("application/octet-stream"),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return 0, fmt.Errorf("probe: create: %w", err)
	}
	parts := make([]s3types.CompletedPart, len(p.sums))
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(p.Parallel, 1))
	for i := range p.sums {
		off := int64(i) * p.PartSize
		n := min(p.PartSize, p.size-off)
		select {
		case slots <- struct{}{}:
		case <-gctx.Done():
		}
		if gctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := p.put(gctx, presigner, httpc, f, key, aws.ToString(mp.UploadId), i, off, n, parts); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(gctx); err != nil {
		_, _ = p.S3.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: aws.String(p.Bucket), Key: aws.String(key), UploadId: mp.UploadId})
		return 0, fmt.Errorf("probe: %w", err)
	}
	if _, err := p.S3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(p.Bucket), Key: aws.String(key), UploadId: mp.UploadId,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return 0, fmt.Errorf("probe: complete: %w", err)
	}
	return time.Since(start).Seconds(), nil
}

// put sends part i+1 (n bytes at off) through its presigned URL.
func (p *Probe) put(ctx context.Context, presigner *upload.S3Presigner, httpc *http.Client, f *os.File, key, uploadID string, i int, off, n int64, parts []s3types.CompletedPart) error {
	signed, err := presigner.PresignUploadPart(ctx, &upload.PresignInput{
		Key: key, UploadID: uploadID, PartNumber: int32(i + 1), ContentLength: n,
		ChecksumSHA256: p.sums[i], Expires: 15 * time.Minute,
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, signed.Method, signed.URL, io.NewSectionReader(f, off, n))
	if err != nil {
		return err
	}
	req.ContentLength = n
	for k, v := range signed.SignedHeader {
		if k != "Host" && k != "Content-Length" {
			req.Header[k] = v
		}
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("part %d: %s: %s", i+1, resp.Status, msg)
	}
	parts[i] = s3types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: aws.String(resp.Header.Get("ETag")), ChecksumSHA256: aws.String(p.sums[i])}
	return nil
}
