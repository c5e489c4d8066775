package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tableitem"
	"github.com/onceupload/onceupload/internal/tooling/bench"
	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/services"
)

// capacityFile is --capacity-file.
var capacityFile int64

// List prices in us-east-1, looked up on 2026-12-02, in dollars per unit or
// request: DynamoDB on demand (standard table class), S3 Standard's request
// tiers. They turn the measured units into dollars per million uploads;
// docs/operating.md's "Cost" quotes them.
const (
	pricePerWriteUnit = 0.625 / 1e6  // $0.625 per million write request units
	pricePerReadUnit  = 0.125 / 1e6  // $0.125 per million read request units
	pricePerS3Tier1   = 0.005 / 1e3  // PUT, COPY, POST, LIST: $0.005 per 1,000
	pricePerS3Tier2   = 0.0004 / 1e3 // GET, HEAD: $0.0004 per 1,000
)

// s3Tier is the price of an S3 request by operation: DELETE and abort are
// free, GET and HEAD tier 2, the rest (PUT, POST, LIST) tier 1.
func s3Tier(op string) float64 {
	switch op {
	case "DeleteObject", "AbortMultipartUpload":
		return 0
	case "HeadObject", "GetObject":
		return pricePerS3Tier2
	}
	return pricePerS3Tier1
}

// capacity measures the DynamoDB units of each path on a bucket of its own
// (as roundTrips does, so the dev stack's finalize does not record the
// measured objects), then of whole uploads through the stack's API, the
// CLI's way, with the meter on the stack's functions.
func capacity(ctx context.Context, rep *report, st *devstack.Stack, meter *bench.Meter) error {
	fmt.Fprintln(os.Stderr, "bench: capacity units per path")
	bucket := "capacity-bench"
	if _, err := s3Client(st).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("capacity: create bucket: %w", err)
	}
	c, err := bench.MeasureCapacity(ctx, st.DynamoURL, st.Table, st.S3URL, bucket, capacityFile)
	if err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: capacity units per upload: one PUT, and %d MiB in parts\n", capacityFile>>20)
	peek := dynamodb.NewFromConfig(services.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(st.DynamoURL) })
	if c.Uploads, err = bench.MeasureUploadCapacity(ctx, st.APIURL, meter, peek, 1<<20, capacityFile); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	rep.Capacity, rep.RecordBytes = &c, c.RecordBytes
	return nil
}

// dollarsPerMillion is what a million uploads like u cost in DynamoDB
// units and in S3 requests, the client's PUTs included.
func dollarsPerMillion(u bench.UploadCapacity) (dynamo, s3 float64) {
	dynamo = (float64(u.WriteUnits)*pricePerWriteUnit + u.ReadUnits*pricePerReadUnit) * 1e6
	s3 = float64(u.ClientPUTs) * pricePerS3Tier1
	for op, n := range u.S3Requests {
		s3 += float64(n) * s3Tier(op)
	}
	return dynamo, s3 * 1e6
}

func opsString(ops map[string]int) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		parts = append(parts, fmt.Sprintf("%s %d", op, ops[op]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func reported(c bench.Capacity) string {
	s := fmt.Sprintf("%s / %s", trimUnits(c.ReportedWriteUnits), trimUnits(c.ReportedReadUnits))
	if c.Unreported > 0 {
		s += fmt.Sprintf(" (%d call(s) unreported)", c.Unreported)
	}
	return s
}

func trimUnits(u float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", u), "0"), ".")
}

func printCapacity(w io.Writer, rep report) {
	c := rep.Capacity
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\n## Capacity (DynamoDB units: AWS's rules from the items' sizes, and dynoxide's ConsumedCapacity)\n\n")
	fmt.Fprintf(w, "Write units include the global secondary index's writes. Rules: a write costs 1 unit per KiB of the larger of the item before and after (a failed conditional write, every replay, by the larger of the stored item and the one sent), a read 1 unit per 4 KiB, half when eventually consistent (the index query). Reported: the server's ConsumedCapacity, write / read; a failed conditional write's error carries none.\n\n")
	fmt.Fprintf(w, "| path | DynamoDB calls | write units | read units | reported (w / r) | with a Lambda session token: write / read |\n|---|---|---|---|---|---|\n")
	for _, p := range bench.SortedPaths(c.Paths) {
		pc := c.Paths[p]
		tok := "—"
		if t, ok := c.PathsWithToken[p]; ok {
			tok = fmt.Sprintf("%d / %s", t.WriteUnits, trimUnits(t.ReadUnits))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s |\n", p, opsString(pc.Calls), pc.WriteUnits, trimUnits(pc.ReadUnits), reported(pc), tok)
	}
	fmt.Fprintf(w, "\nThe multipart records are of %d parts (%d MiB in the CLI's part size); complete is of a two-part upload.\n", c.MultipartParts, c.MultipartBytes>>20)

	if len(c.Uploads) > 0 {
		fmt.Fprintf(w, "\nWhole uploads through the local API with pkg/client, as the CLI sends them (bytes sent for real; every function's calls, finalize's included):\n\n")
		fmt.Fprintf(w, "| upload | bytes | parts | DynamoDB calls | write units | read units | reported (w / r) | functions' S3 requests | client PUTs | $ per million: DynamoDB | $ per million: S3 requests |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, name := range bench.UploadOrder {
			u, ok := c.Uploads[name]
			if !ok {
				continue
			}
			d, s := dollarsPerMillion(u)
			fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %s | %s | %s | %d | %.2f | %.2f |\n", name, u.Bytes, u.Parts, opsString(u.Calls),
				u.WriteUnits, trimUnits(u.ReadUnits), reported(u.Capacity), opsString(u.S3Requests), u.ClientPUTs, d, s)
		}
		fmt.Fprintf(w, "\nPrices: us-east-1 list prices of 2026-12-02, DynamoDB on demand $0.625 per million write and $0.125 per million read units; S3 Standard $0.005 per 1,000 PUT, POST or LIST, $0.0004 per 1,000 GET or HEAD (the S3 column is the floor any upload pays). Lambda, API Gateway and KMS are not included.\n")
	}

	fmt.Fprintf(w, "\n| record state | bytes | write units per write | read units (consistent) |\n|---|---|---|---|\n")
	for _, st := range bench.RecordStates {
		if b, ok := rep.RecordBytes[st]; ok {
			fmt.Fprintf(w, "| %s | %d | %d | %s |\n", st, b, tableitem.WriteUnits(b), trimUnits(tableitem.ReadUnits(b, true)))
		}
	}

	var diffs []string
	add := func(where string, cp bench.Capacity) {
		for _, d := range cp.Differences() {
			if line := where + ": " + d; !slices.Contains(diffs, line) {
				diffs = append(diffs, line)
			}
		}
	}
	for _, p := range bench.SortedPaths(c.Paths) {
		add(p, c.Paths[p])
	}
	for _, p := range bench.SortedPaths(c.PathsWithToken) {
		add(p+" (token)", c.PathsWithToken[p])
	}
	for _, name := range bench.UploadOrder {
		if u, ok := c.Uploads[name]; ok {
			add(name, u.Capacity)
		}
	}
	fmt.Fprintf(w, "\nWhere dynoxide's ConsumedCapacity differs from AWS's rules:\n\n")
	if len(diffs) == 0 {
		fmt.Fprintf(w, "- nowhere\n")
	}
	for _, d := range diffs {
		fmt.Fprintf(w, "- %s\n", d)
	}
}
