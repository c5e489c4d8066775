package upload

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// presignKeys are a plain key and ones that need every kind of escaping in
// a path: spaces, non-ASCII, "+", "%", "=", "~" (kept), "/" (kept).
var presignKeys = []string{"uploads/0123abcd", "in/sub dir/a+b%c é.txt", "50%+50% = 100%/plus+/ünï cödé~x_y.z"}

// s3PathEscape is S3's escaping of a key in a path, as SigV4 canonicalizes
// it: every byte but the unreserved characters and "/" as %XX.
func s3PathEscape(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~/", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// presignClient is an S3 client as a deployment configures one, and where
// it addresses the bucket's objects: wantBase + escaped key.
type presignClient struct {
	name     string
	client   *s3.Client
	wantBase string
	region   string
	token    string // the session token the URL must carry, if any
}

func presignClients() []presignClient {
	client := func(region, accessKey, token, endpoint string, pathStyle bool) *s3.Client {
		cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(accessKey, "SECRET", token)}
		if endpoint != "" {
			cfg.BaseEndpoint = aws.String(endpoint)
		}
		return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
	}
	return []presignClient{
		{name: "aws, virtual-hosted", client: client("eu-west-1", "AKID", "", "", false),
			wantBase: "https://" + presignBucket + ".s3.eu-west-1.amazonaws.com/", region: "eu-west-1"},
		{name: "aws, session credentials", client: client("us-east-1", "ASIA", "TOKEN/with+chars=", "", false),
			wantBase: "https://" + presignBucket + ".s3.us-east-1.amazonaws.com/", region: "us-east-1", token: "TOKEN/with+chars="},
		{name: "aws, path style", client: client("eu-west-1", "AKID", "", "", true),
			wantBase: "https://s3.eu-west-1.amazonaws.com/" + presignBucket + "/", region: "eu-west-1"},
		{name: "local, path style", client: client("us-east-1", "AKID", "", "http://127.0.0.1:9000", true),
			wantBase: "http://127.0.0.1:9000/" + presignBucket + "/", region: "us-east-1"},
		{name: "custom endpoint, virtual-hosted", client: client("eu-west-1", "AKID", "", "https://s3.example.com:8443", false),
			wantBase: "https://" + presignBucket + ".s3.example.com:8443/", region: "eu-west-1"},
	}
}

const (
	presignBucket   = "my-bucket"
	presignSum      = "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="
	presignUploadID = "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA+/="
)

var signatureRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkPresigned fails t unless req is a SigV4 PUT presigned now by c to
// the bucket's key, valid for lifetime, whose signature covers the headers
// in signed with exactly their values (and S3 can check them: each is in
// X-Amz-SignedHeaders).
func checkPresigned(t *testing.T, c presignClient, req *v4.PresignedHTTPRequest, key string, lifetime time.Duration, signed map[string]string) url.Values {
	t.Helper()
	if req.Method != http.MethodPut {
		t.Errorf("key %q: method %s, want PUT", key, req.Method)
	}
	addr, rawQuery, _ := strings.Cut(req.URL, "?")
	if want := c.wantBase + s3PathEscape(key); addr != want {
		t.Errorf("key %q: URL %s,\nwant %s?…", key, req.URL, want)
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatalf("key %q: query of %s: %v", key, req.URL, err)
	}
	if got, want := query.Get("X-Amz-Expires"), strconv.Itoa(int(lifetime/time.Second)); got != want {
		t.Errorf("key %q: X-Amz-Expires %q, want %q (%s)", key, got, want, lifetime)
	}
	signedAt, err := time.Parse("20060102T150405Z", query.Get("X-Amz-Date"))
	if err != nil || time.Since(signedAt).Abs() > time.Minute {
		t.Errorf("key %q: X-Amz-Date %q (%v), want now", key, query.Get("X-Amz-Date"), err)
	}
	wantCredential := fmt.Sprintf("/%s/%s/s3/aws4_request", signedAt.Format("20060102"), c.region)
	if query.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || !strings.HasSuffix(query.Get("X-Amz-Credential"), wantCredential) ||
		!signatureRE.MatchString(query.Get("X-Amz-Signature")) {
		t.Errorf("key %q: not a SigV4 presigned URL for %s: %s", key, wantCredential, req.URL)
	}
	if got := query.Get("X-Amz-Security-Token"); got != c.token {
		t.Errorf("key %q: X-Amz-Security-Token %q, want %q", key, got, c.token)
	}
	signedHeaders := strings.Split(query.Get("X-Amz-SignedHeaders"), ";")
	for name, value := range signed {
		if got := req.SignedHeader.Values(name); len(got) != 1 || got[0] != value {
			t.Errorf("key %q: signed header %s = %q, want %q", key, name, got, value)
		}
		if !slices.Contains(signedHeaders, strings.ToLower(name)) {
			t.Errorf("key %q: %s is not in X-Amz-SignedHeaders %v", key, name, signedHeaders)
		}
	}
	if !slices.Contains(signedHeaders, "host") {
		t.Errorf("key %q: host is not signed: %v", key, signedHeaders)
	}
	return query
}

// S3Presigner presigns a PUT of the object to the bucket's key as the
// client addresses it, for the lifetime asked, with its type, length and
// SHA-256 signed, so that S3 refuses any other bytes.
func TestPresignPutObject(t *testing.T) {
	ctx := context.Background()
	for _, c := range presignClients() {
		t.Run(c.name, func(t *testing.T) {
			p := NewPresigner(c.client, presignBucket)
			for _, key := range presignKeys {
				for _, lifetime := range []time.Duration{time.Second, 15 * time.Minute, 7 * 24 * time.Hour} {
					req, err := p.PresignPutObject(ctx, &PresignInput{
						Key: key, ContentType: "image/jpeg; q=1", ContentLength: 48213, ChecksumSHA256: presignSum, Expires: lifetime,
					})
					if err != nil {
						t.Fatalf("key %q: %v", key, err)
					}
					query := checkPresigned(t, c, req, key, lifetime, map[string]string{
						"Content-Type": "image/jpeg; q=1", "Content-Length": "48213", "X-Amz-Checksum-Sha256": presignSum,
					})
					if query.Has("partNumber") || query.Has("uploadId") {
						t.Errorf("key %q: a PutObject URL with a part's query: %s", key, req.URL)
					}
				}
			}
		})
	}
}

// S3Presigner presigns a PUT of one part of a multipart upload: the part
// number and upload id in the query, its length and SHA-256 signed.
func TestPresignUploadPart(t *testing.T) {
	ctx := context.Background()
	for _, c := range presignClients() {
		t.Run(c.name, func(t *testing.T) {
			p := NewPresigner(c.client, presignBucket)
			for _, key := range presignKeys {
				for _, part := range []int32{1, 10000} {
					req, err := p.PresignUploadPart(ctx, &PresignInput{
						Key: key, UploadID: presignUploadID, PartNumber: part, ContentLength: 5 << 20, ChecksumSHA256: presignSum, Expires: time.Hour,
					})
					if err != nil {
						t.Fatalf("key %q part %d: %v", key, part, err)
					}
					query := checkPresigned(t, c, req, key, time.Hour, map[string]string{
						"Content-Length": strconv.Itoa(5 << 20), "X-Amz-Checksum-Sha256": presignSum,
					})
					if got := query["partNumber"]; len(got) != 1 || got[0] != strconv.Itoa(int(part)) {
						t.Errorf("key %q: partNumber %q, want %d", key, got, part)
					}
					if got := query["uploadId"]; len(got) != 1 || got[0] != presignUploadID {
						t.Errorf("key %q: uploadId %q, want %q", key, got, presignUploadID)
					}
				}
			}
		})
	}
}

// A presign without what it needs is refused, not signed with a default.
func TestPresignRefusesIncompleteInput(t *testing.T) {
	ctx := context.Background()
	p := NewPresigner(presignClients()[0].client, presignBucket)
	object := PresignInput{Key: "uploads/0123abcd", ContentType: "text/plain", ContentLength: 1, ChecksumSHA256: presignSum, Expires: time.Minute}
	part := PresignInput{Key: "uploads/0123abcd", ContentLength: 1, ChecksumSHA256: presignSum, UploadID: presignUploadID, PartNumber: 1, Expires: time.Minute}
	// The complete inputs are signed, so each refusal below is its change's.
	if _, err := p.PresignPutObject(ctx, &object); err != nil {
		t.Fatalf("complete object input: %v", err)
	}
	if _, err := p.PresignUploadPart(ctx, &part); err != nil {
		t.Fatalf("complete part input: %v", err)
	}
	for name, change := range map[string]func(*PresignInput){
		"no key":              func(in *PresignInput) { in.Key = "" },
		"no expiry":           func(in *PresignInput) { in.Expires = 0 },
		"a negative expiry":   func(in *PresignInput) { in.Expires = -time.Minute },
		"no part number":      func(in *PresignInput) { in.PartNumber = 0 },
		"a negative part":     func(in *PresignInput) { in.PartNumber = -1 },
		"no upload id":        func(in *PresignInput) { in.UploadID = "" },
		"no key nor a number": func(in *PresignInput) { in.Key, in.PartNumber = "", 0 },
	} {
		in := part
		change(&in)
		if req, err := p.PresignUploadPart(ctx, &in); err == nil {
			t.Errorf("part with %s: signed %s", name, req.URL)
		}
		if in.PartNumber != part.PartNumber || in.UploadID != part.UploadID {
			continue // a part's own fields: a PutObject does not read them
		}
		in = object
		change(&in)
		if req, err := p.PresignPutObject(ctx, &in); err == nil {
			t.Errorf("object with %s: signed %s", name, req.URL)
		}
	}
}
