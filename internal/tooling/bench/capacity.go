package bench

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/config"
	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/internal/wiring"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/dynamostore"
)

// Capacity is what the DynamoDB calls of one path, or of one whole upload,
// cost: by AWS's rules (the meter's, from the items' sizes) and as the
// server reported it (ConsumedCapacity).
type Capacity struct {
	// Calls counts the DynamoDB calls by operation.
	Calls map[string]int `json:"calls"`
	// WriteUnits and ReadUnits are by AWS's rules; IndexWriteUnits is the
	// global secondary indexes' part of WriteUnits.
	WriteUnits      int     `json:"write_units"`
	IndexWriteUnits int     `json:"index_write_units,omitempty"`
	ReadUnits       float64 `json:"read_units"`
	// ReportedWriteUnits and ReportedReadUnits sum the server's
	// ConsumedCapacity of the writes and the reads that carried one;
	// Unreported counts the calls that carried none.
	ReportedWriteUnits float64 `json:"reported_write_units"`
	ReportedReadUnits  float64 `json:"reported_read_units"`
	Unreported         int     `json:"calls_unreported,omitempty"`
	// Detail is each call.
	Detail []Call `json:"detail"`
}

// Summarize adds up calls.
func Summarize(calls []Call) Capacity {
	c := Capacity{Calls: map[string]int{}, Detail: calls}
	for _, call := range calls {
		c.Calls[call.Op]++
		c.WriteUnits += call.WriteUnits
		c.IndexWriteUnits += call.IndexWriteUnits
		c.ReadUnits += call.ReadUnits
		switch {
		case call.Reported == nil:
			c.Unreported++
		case isRead(call.Op):
			c.ReportedReadUnits += *call.Reported
		default:
			c.ReportedWriteUnits += *call.Reported
		}
	}
	return c
}

func isRead(op string) bool { return op == "GetItem" || op == "Query" }

// Differences says, call by call, where the server's ConsumedCapacity
// differs from AWS's rules: "PutItem (failed): rules 2, server none".
func (c Capacity) Differences() []string {
	var out []string
	for _, call := range c.Detail {
		op := call.Op
		if call.Failed {
			op += " (failed)"
		}
		switch {
		case call.Reported == nil:
			out = append(out, fmt.Sprintf("%s: rules %s, server none", op, units(call.Units())))
		case *call.Reported != call.Units():
			d := fmt.Sprintf("%s: rules %s, server %s", op, units(call.Units()), units(*call.Reported))
			if call.IndexWriteUnits > 0 || call.ReportedIndex > 0 {
				d += fmt.Sprintf(" (indexes: rules %d, server %s)", call.IndexWriteUnits, units(call.ReportedIndex))
			}
			out = append(out, d)
		}
	}
	return out
}

func units(u float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", u), "0"), ".")
}

// CapacityReport is the capacity section of make bench: units per path and
// per upload, and the record's size at each state.
type CapacityReport struct {
	// Paths is each path once, on a record of today's shape; PathsWithToken
	// the single-PUT paths again with presign credentials that carry a
	// session token of Lambda's length (services.LambdaSessionToken), as
	// every URL signed on Lambda does.
	Paths          map[string]Capacity `json:"paths"`
	PathsWithToken map[string]Capacity `json:"paths_with_token"`
	// Uploads is each whole upload the CLI's way (MeasureUploadCapacity).
	Uploads map[string]UploadCapacity `json:"uploads,omitempty"`
	// RecordBytes is the stored record's size at each state (DynamoDB's
	// item size), read from the table after the write that made it. make
	// bench reports it beside capacity, as record_bytes.
	RecordBytes map[string]int `json:"-"`
	// MultipartParts is the part count of the multipart records measured:
	// the CLI's plan for MultipartBytes.
	MultipartParts int   `json:"multipart_parts"`
	MultipartBytes int64 `json:"multipart_bytes"`
}

// PathOrder is the order the paths are reported in.
var PathOrder = []string{"create", "replay-pending", "finalize", "replay-completed", "status", "status-heal",
	"finalize-after-heal", "multipart-create", "sign", "complete", "abort"}

// RecordStates are the keys of RecordBytes, in order.
var RecordStates = []string{"pending_single", "completed_single", "pending_single_with_token", "completed_single_with_token",
	"pending_single_on_lambda", "pending_multipart", "completed_multipart"}

// MeasureCapacity runs each path once, as MeasureRoundTrips does, against
// an existing table and bucket on the DynamoDB and S3 servers at the
// endpoints, with the service the functions build (wiring.Presign) and a
// Meter on its DynamoDB client; then the single-PUT paths again with a
// Lambda-length session token in the presign credentials, and a create
// whose URL is signed as on Lambda (pending_single_on_lambda: the token,
// a temporary key id, AWS's endpoint and a bucket named as the template
// names it). multipartBytes is the size of the multipart upload whose
// record is measured (the CLI's part size for it); its bytes are not sent:
// its create, a sign and its abort need none. The completed multipart
// record is of a two-part upload whose parts are sent.
func MeasureCapacity(ctx context.Context, dynamoURL, table, s3URL, bucket string, multipartBytes int64) (CapacityReport, error) {
	rep := CapacityReport{Paths: map[string]Capacity{}, PathsWithToken: map[string]Capacity{}, RecordBytes: map[string]int{},
		MultipartBytes: multipartBytes}
	local := services.AWSConfig()
	meter := &Meter{}
	env := map[string]string{"TABLE_NAME": table, "BUCKET_NAME": bucket, "S3_FORCE_PATH_STYLE": "true"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, _, err := wiring.Presign(ctx, lookup, logger,
		wiring.Local(dynamoURL, s3URL, local.Credentials, local.Region),
		func(o *wiring.Options) {
			o.DynamoDB = append(o.DynamoDB, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, meter.Middleware) })
		})
	if err != nil {
		return rep, err
	}
	meter.Arm(dynamodb.NewFromConfig(local, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynamoURL) }))
	defer meter.Disarm()
	if err := singlePaths(ctx, svc, meter, bucket, "capacity", rep.Paths, rep.RecordBytes, "", put); err != nil {
		return rep, err
	}
	if err := multipartPaths(ctx, svc, meter, &rep); err != nil {
		return rep, err
	}
	tokenSvc, putPlain, err := tokenService(ctx, lookup, logger, dynamoURL, s3URL, meter, false)
	if err != nil {
		return rep, err
	}
	if err := singlePaths(ctx, tokenSvc, meter, bucket, "capacity-token", rep.PathsWithToken, rep.RecordBytes, "_with_token", putPlain); err != nil {
		return rep, fmt.Errorf("with a session token: %w", err)
	}
	// A create as on Lambda: its URL signed for AWS's endpoint and a
	// bucket named as the template names it, with temporary credentials'
	// key id. Only the create runs: it sends nothing to S3.
	env["BUCKET_NAME"] = lambdaBucket
	lambdaSvc, _, err := tokenService(ctx, lookup, logger, dynamoURL, s3URL, meter, true)
	if err != nil {
		return rep, err
	}
	meter.Take()
	if _, err := lambdaSvc.Create(ctx, "capacity-lambda", "capacity-key-0003", singleRequest()); err != nil {
		return rep, fmt.Errorf("create as on Lambda: %w", err)
	}
	calls, _ := meter.Take()
	rep.RecordBytes["pending_single_on_lambda"] = lastWritten(calls)
	return rep, nil
}

// What a URL signed on Lambda holds besides the token: temporary
// credentials' key id (20 characters, "ASIA" and 16 more) and the bucket
// of template.yaml (onceupload-<account>-<region>-<12 hex of the stack id>),
// addressed virtual-hosted at AWS's regional endpoint.
const (
	lambdaAccessKeyID = "ASIAEXAMPLEEXAMPLE00"
	lambdaBucket      = "onceupload-123456789012-us-east-1-0123456789ab"
)

// singleRequest is the create of the single-PUT paths.
func singleRequest() api.CreateRequest {
	content := singleContent()
	sum := sha256.Sum256(content)
	return api.CreateRequest{Filename: "capacity.txt", ContentType: "text/plain", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

func singleContent() []byte { return []byte("capacity of one upload") }

// tokenService is the service of wiring.Service, but for its presigner,
// whose credentials carry a session token of Lambda's length: the records
// hold the URLs a function on Lambda signs. The local S3 server refuses a
// token it never issued, so the objects client (HeadObject) keeps the
// local credentials, and putPlain stores an upload's object through a URL
// signed as the token's was, without the token. asOnLambda signs, too,
// with lambdaAccessKeyID for AWS's own endpoint: URLs that no local server
// takes.
func tokenService(ctx context.Context, lookup func(string) (string, bool), logger *slog.Logger, dynamoURL, s3URL string, meter *Meter, asOnLambda bool) (
	svc *upload.Service, putPlain func(context.Context, api.Upload, []byte) error, err error) {
	cfg, err := config.LoadPresign(lookup)
	if err != nil {
		return nil, nil, err
	}
	local := services.AWSConfig()
	dyn := dynamodb.NewFromConfig(local, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(dynamoURL)
		o.APIOptions = append(o.APIOptions, meter.Middleware)
	})
	s3Opts := func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(s3URL), cfg.S3ForcePathStyle }
	objects := s3.NewFromConfig(local, s3Opts)
	withToken := s3.NewFromConfig(local, s3Opts, func(o *s3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(services.AccessKey, services.SecretKey, services.LambdaSessionToken())
		if asOnLambda {
			o.BaseEndpoint, o.UsePathStyle = nil, false
			o.Credentials = credentials.NewStaticCredentialsProvider(lambdaAccessKeyID, services.SecretKey, services.LambdaSessionToken())
		}
	})
	store := dynamostore.New(dyn, cfg.Table, func(o *idempotency.Options) { o.TTL = cfg.IdempotencyTTL })
	svc = upload.New(store, upload.NewPresigner(withToken, cfg.Upload.Bucket), objects, cfg.Upload,
		func(o *upload.Options) { o.Logger = logger })
	plain := upload.NewPresigner(objects, cfg.Upload.Bucket)
	putPlain = func(ctx context.Context, u api.Upload, content []byte) error {
		sum := sha256.Sum256(content)
		req, err := plain.PresignPutObject(ctx, &upload.PresignInput{Key: u.StorageKey, ContentType: u.ContentType,
			ContentLength: int64(len(content)), ChecksumSHA256: base64.StdEncoding.EncodeToString(sum[:]), Expires: time.Minute})
		if err != nil {
			return err
		}
		// The signed headers but those the HTTP client sets itself.
		hdr := map[string]string{}
		for k, v := range req.SignedHeader {
			if k != "Host" && k != "Content-Length" && len(v) > 0 {
				hdr[k] = v[0]
			}
		}
		return put(ctx, api.Upload{UploadID: u.UploadID, Upload: &api.PutInstructions{Method: req.Method, URL: req.URL, Headers: hdr}}, content)
	}
	return svc, putPlain, nil
}

// singlePaths runs the paths of a single PUT on svc, for tenant, into
// paths, and records the pending and completed records' sizes under their
// states with suffix; put stores an upload's object as its client would.
func singlePaths(ctx context.Context, svc *upload.Service, meter *Meter, bucket, tenant string, paths map[string]Capacity, bytes map[string]int, suffix string,
	put func(context.Context, api.Upload, []byte) error) error {
	content, req := singleContent(), singleRequest()
	var created, healed api.Upload
	create := func(key string, u *api.Upload) error {
		r, err := svc.Create(ctx, tenant, key, req)
		if err == nil {
			err = json.Unmarshal(r.Body, u)
		}
		return err
	}
	steps := []struct {
		path string
		fn   func() error
		// state, if set, is the record state whose size the path's last
		// write leaves.
		state string
	}{
		{"create", func() error { return create("capacity-key-0001", &created) }, "pending_single"},
		{"replay-pending", func() error {
			_, err := svc.Create(ctx, tenant, "capacity-key-0001", req)
			return err
		}, ""},
		{"finalize", func() error {
			if err := put(ctx, created, content); err != nil {
				return err
			}
			out, err := svc.Finalize(ctx, upload.ObjectCreated{Bucket: bucket, Key: created.StorageKey, Size: int64(len(content)), ETag: "e", Time: time.Now()})
			if err == nil && out != upload.OutcomeCompleted {
				err = fmt.Errorf("outcome %s", out)
			}
			return err
		}, "completed_single"},
		{"replay-completed", func() error {
			_, err := svc.Create(ctx, tenant, "capacity-key-0001", req)
			return err
		}, ""},
		{"status", func() error {
			_, err := svc.Status(ctx, tenant, created.UploadID)
			return err
		}, ""},
		{"status-heal", func() error {
			err := create("capacity-key-0002", &healed)
			if err == nil {
				err = put(ctx, healed, content)
			}
			meter.Take() // the create is not the status's
			if err == nil {
				_, err = svc.Status(ctx, tenant, healed.UploadID)
			}
			return err
		}, ""},
		// S3's event after the heal: the refused finalize every one-PUT
		// upload of the CLI pays (its status heals first), billed by the
		// completed record.
		{"finalize-after-heal", func() error {
			out, err := svc.Finalize(ctx, upload.ObjectCreated{Bucket: bucket, Key: healed.StorageKey, Size: int64(len(content)), ETag: "e", Time: time.Now()})
			if err == nil && out != upload.OutcomeDuplicate {
				err = fmt.Errorf("outcome %s, want %s", out, upload.OutcomeDuplicate)
			}
			return err
		}, ""},
	}
	for _, s := range steps {
		meter.Take()
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		calls, _ := meter.Take()
		paths[s.path] = Summarize(calls)
		if s.state != "" {
			bytes[s.state+suffix] = lastWritten(calls)
		}
	}
	return nil
}

// multipartPaths runs the multipart paths: the create, a sign and the
// abort of an upload of rep.MultipartBytes in the CLI's part size (no
// bytes sent), and the complete of a two-part upload.
func multipartPaths(ctx context.Context, svc *upload.Service, meter *Meter, rep *CapacityReport) error {
	const tenant = "capacity"
	partSize := client.PartSizeFor(rep.MultipartBytes)
	if partSize <= 0 {
		return fmt.Errorf("%d bytes go up in one PUT, not in parts", rep.MultipartBytes)
	}
	rep.MultipartParts = api.PartCount(rep.MultipartBytes, partSize)
	var big, small api.Upload
	smallParts := [][]byte{make([]byte, api.MinPartSize), []byte("the last part")}
	var declared []api.PartToSign
	for i, p := range smallParts {
		sum := sha256.Sum256(p)
		declared = append(declared, api.PartToSign{PartNumber: i + 1, SHA256: hex.EncodeToString(sum[:])})
	}
	steps := []struct {
		path  string
		fn    func() error
		state string
	}{
		{"multipart-create", func() error {
			r, err := svc.Create(ctx, tenant, "capacity-multipart-0001", api.CreateRequest{
				Filename: "big.bin", ContentType: "application/octet-stream", Size: rep.MultipartBytes, PartSize: partSize})
			if err == nil {
				err = json.Unmarshal(r.Body, &big)
			}
			return err
		}, "pending_multipart"},
		{"sign", func() error {
			// The CLI signs its first part alone, as soon as it is hashed;
			// a sign costs the same for one part or a hundred.
			_, err := svc.SignParts(ctx, tenant, big.UploadID, api.SignPartsRequest{Parts: declared[:1]})
			return err
		}, ""},
		{"abort", func() error {
			_, err := svc.Abort(ctx, tenant, big.UploadID)
			return err
		}, ""},
		{"complete", func() error {
			r, err := svc.Create(ctx, tenant, "capacity-multipart-0002", api.CreateRequest{
				Filename: "small.bin", ContentType: "application/octet-stream", Size: int64(api.MinPartSize + len(smallParts[1])), PartSize: api.MinPartSize})
			if err == nil {
				err = json.Unmarshal(r.Body, &small)
			}
			var signed api.SignedParts
			if err == nil {
				r, err = svc.SignParts(ctx, tenant, small.UploadID, api.SignPartsRequest{Parts: declared})
				if err == nil {
					err = json.Unmarshal(r.Body, &signed)
				}
			}
			for _, sp := range signed.Parts {
				if err == nil {
					err = putPart(ctx, sp, smallParts[sp.PartNumber-1])
				}
			}
			meter.Take() // the create and sign are not the complete's
			if err == nil {
				_, err = svc.Complete(ctx, tenant, small.UploadID, api.CompleteRequest{Parts: declared})
			}
			return err
		}, "completed_multipart"},
	}
	for _, s := range steps {
		meter.Take()
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		calls, _ := meter.Take()
		rep.Paths[s.path] = Summarize(calls)
		if s.state != "" {
			rep.RecordBytes[s.state] = lastWritten(calls)
		}
	}
	return nil
}

// lastWritten is the stored size of the item the last successful write of
// calls left.
func lastWritten(calls []Call) int {
	for _, c := range slices.Backward(calls) {
		if !c.Failed && !isRead(c.Op) && c.Op != "DeleteItem" {
			return c.After
		}
	}
	return 0
}

// putPart sends a part to its presigned URL.
func putPart(ctx context.Context, sp api.SignedPart, body []byte) error {
	code, err := services.PutSigned(ctx, sp.PutInstructions, body, nil)
	if err == nil && code != 200 {
		err = fmt.Errorf("PUT part %d: status %d", sp.PartNumber, code)
	}
	return err
}

// SortedPaths is paths' keys in PathOrder, then any others sorted.
func SortedPaths(paths map[string]Capacity) []string {
	var out []string
	for _, p := range PathOrder {
		if _, ok := paths[p]; ok {
			out = append(out, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
