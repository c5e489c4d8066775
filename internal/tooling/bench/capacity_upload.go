package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/onceupload/onceupload/pkg/client"
)

// UploadCapacity is what one whole upload the CLI's way costs: the DynamoDB
// calls of every function it set off (the finalize that S3's event starts
// included), the functions' S3 requests, and the client's own PUTs to S3.
type UploadCapacity struct {
	Capacity
	Bytes int64 `json:"bytes"`
	// Parts is the part count of an upload in parts, 0 for one PUT.
	Parts int `json:"parts"`
	// S3Requests are the functions' S3 requests by operation; ClientPUTs
	// the client's PUTs through presigned URLs (one per part, or the one).
	S3Requests map[string]int `json:"s3_requests"`
	ClientPUTs int            `json:"client_puts"`
}

// The uploads MeasureUploadCapacity makes.
const (
	UploadSingle    = "single-put"
	UploadMultipart = "multipart"
)

// UploadOrder is the order the uploads are reported in.
var UploadOrder = []string{UploadSingle, UploadMultipart}

// zeroes reads as endless zero bytes: the bytes of an upload whose cost,
// not content, is measured.
type zeroes struct{}

func (zeroes) ReadAt(p []byte, _ int64) (int, error) {
	clear(p)
	return len(p), nil
}

// MeasureUploadCapacity uploads a file of singleBytes and one of
// multipartBytes to the API at apiURL with pkg/client, as the CLI does
// (its defaults: the part size and parallelism it picks, its signing in
// batches as parts are hashed, its wait for completion), the bytes sent
// for real. The stack's functions' clients carry meter; peek reads their
// table. An upload costs every call the meter sees from its create until
// the stack has been quiet for a second after the client returned. Which
// of the status and finalize records the object first, and how many parts
// each sign request carries, are the run's: they vary with timing, and the
// calls of each run say what happened (Detail). Writes to one item at once
// (that status and finalize) can blur the sizes the meter reads around a
// call by the other's write.
func MeasureUploadCapacity(ctx context.Context, apiURL string, meter *Meter, peek *dynamodb.Client, singleBytes, multipartBytes int64) (map[string]UploadCapacity, error) {
	c, err := client.New(apiURL)
	if err != nil {
		return nil, err
	}
	out := map[string]UploadCapacity{}
	meter.Arm(peek)
	defer meter.Disarm()
	for _, u := range []struct {
		name string
		size int64
	}{{UploadSingle, singleBytes}, {UploadMultipart, multipartBytes}} {
		if inParts := client.PartSizeFor(u.size) > 0; inParts != (u.name == UploadMultipart) {
			return nil, fmt.Errorf("%s: %d bytes, which the CLI sends in parts: %v", u.name, u.size, inParts)
		}
		meter.Take()
		res, err := c.UploadReader(ctx, zeroes{}, u.size, client.UploadInput{Filename: "capacity-" + u.name + ".bin", ContentType: "application/octet-stream"})
		if err != nil {
			return nil, fmt.Errorf("%s upload: %w", u.name, err)
		}
		if err := quiet(ctx, meter); err != nil {
			return nil, err
		}
		calls, s3 := meter.Take()
		uc := UploadCapacity{Capacity: Summarize(calls), Bytes: u.size, S3Requests: s3, ClientPUTs: res.PartsSent}
		if res.Upload.Multipart != nil {
			uc.Parts = res.Upload.Multipart.PartCount
		} else if res.Put == client.PutStored {
			uc.ClientPUTs = 1
		}
		out[u.name] = uc
	}
	return out, nil
}

// quiet waits until the meter has seen nothing new for a second (the
// finalize of an object S3 announced may still be running), or ten
// seconds have passed.
func quiet(ctx context.Context, meter *Meter) error {
	deadline := time.Now().Add(10 * time.Second)
	for last := meter.pending(); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		n := meter.pending()
		if n == last {
			return nil
		}
		last = n
	}
	return nil
}
