package upload

// Fuzz targets for everything the service reads from clients and from S3:
// the create body as decoded (by package api) and validated, with its
// fingerprint, upload ids, and the object keys of S3 events (the sign and
// complete bodies' and the Idempotency-Key header's are in package api).
// Each also runs as a plain test over its f.Add seeds and
// testdata/fuzz/<FuzzName>/; fuzz longer with e.g.
//
//	go test -run '^$' -fuzz '^FuzzDecodeCreateRequest$' -fuzztime 5m ./internal/upload/

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/unicode/norm"

	"github.com/onceupload/onceupload/internal/tooling/s3fake"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/idempotency"
	"github.com/onceupload/onceupload/pkg/idempotency/memorystore"
	"github.com/onceupload/onceupload/pkg/idempotency/recordstore"
)

// goErrorText is text of Go or SDK errors that must never reach a client.
var goErrorText = []string{"json:", "strconv", "operation error", "%!", "invalid character", "unexpected end of JSON",
	"mime:", "runtime error", "goroutine", "<nil>", "parse id", "upload id"}

// checkRefusal asserts err is one of the refusals the handler maps to a
// 4xx, with a message written for clients.
func checkRefusal(t *testing.T, body []byte, err error) {
	t.Helper()
	var v *api.RequestError
	switch {
	case errors.Is(err, api.ErrBodyTooLarge), errors.Is(err, ErrFileTooLarge), errors.Is(err, ErrUnsupportedMedia), errors.Is(err, ErrNeedsParts):
		return
	case !errors.As(err, &v):
		t.Fatalf("body %q: refused with %T %v, not a client error", body, err, err)
	}
	switch v.Field {
	case "body", "filename", "contentType", "size", "sha256", "partSize":
	default:
		t.Fatalf("body %q: RequestError names field %q", body, v.Field)
	}
	// The only client text a message echoes is an unknown field's name,
	// quoted; strip it before looking for Go error text.
	msg := v.Message
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		if _, err := strconv.Unquote(strings.TrimSuffix(name, ".")); err != nil {
			t.Fatalf("body %q: unknown field message %q does not quote the name", body, msg)
		}
		msg = "unknown field"
	}
	if msg == "" {
		t.Fatalf("body %q: empty message", body)
	}
	for _, leak := range goErrorText {
		if strings.Contains(msg, leak) {
			t.Fatalf("body %q: message %q leaks %q", body, v.Message, leak)
		}
	}
}

// jsonString encodes s as a JSON string; escapeAll writes every character
// as \uXXXX (a surrogate pair above U+FFFF), another valid spelling.
func jsonQuote(s string, escapeAll bool) string {
	if !escapeAll {
		b, _ := json.Marshal(s) // HTML-escaped: yet another spelling
		return string(b)
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r > 0xffff {
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04X\u%04X`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			continue
		}
		fmt.Fprintf(&b, `\u%04X`, r)
	}
	b.WriteByte('"')
	return b.String()
}

// respell writes r as another body for the same request: the fields in
// the given order, ws between every token, the digest in the given case.
func respell(r api.CreateRequest, order [4]int, ws string, escapeAll bool, digestCase func(string) string) []byte {
	fields := [4]string{
		`"filename"` + ws + ":" + ws + jsonQuote(r.Filename, escapeAll),
		`"contentType"` + ws + ":" + ws + jsonQuote(r.ContentType, escapeAll),
		`"size"` + ws + ":" + ws + strconv.FormatInt(r.Size, 10),
		`"sha256"` + ws + ":" + ws + jsonQuote(digestCase(r.SHA256), escapeAll),
	}
	parts := make([]string, 0, 5)
	for _, j := range order {
		if j == 3 && r.SHA256 == "" {
			continue // a multipart create may leave it out
		}
		parts = append(parts, fields[j])
	}
	if r.PartSize != 0 {
		parts = append(parts, `"partSize"`+ws+":"+ws+strconv.FormatInt(r.PartSize, 10))
	}
	return []byte(ws + "{" + ws + strings.Join(parts, ws+","+ws) + ws + "}" + ws)
}

func mixedCase(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i += 2 {
		if 'a' <= b[i] && b[i] <= 'f' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

const fuzzDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// FuzzDecodeCreateRequest decodes and validates arbitrary bodies. A
// refusal is always a client error; an accepted request is within the
// contract, and every other spelling of it has the same fingerprint.
func FuzzDecodeCreateRequest(f *testing.F) {
	for _, seed := range []string{
		`{"filename":"photo.jpg","contentType":"image/jpeg","size":48213,"sha256":"` + fuzzDigest + `"}`,
		`{ "sha256" : "` + strings.ToUpper(fuzzDigest) + `", "size": 1, "contentType": "application/pdf; x=\"y\"", "filename": "résumé (final) 🎉.pdf" }`,
		`{"filename":"a\u0026b \u00e9.jpg","contentType":"image/svg+xml","size":5368709120,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"../x.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a\u0000b","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"..\\x.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a\u0085\u202e.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1e3,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":99999999999999999999,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":-1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":"1","sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `","extra":1}`,
		`{"filename":"a.jpg","filename":"b.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"} {}`,
		`{"filename":"\ud800.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a\udfff.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a\ud83d\ude00\ud800\u0041.jpg","contentType":"image/jpeg\udc00","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `","\ud800":1}`,
		`{"filename":"a.jpg","contentType":" image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a.jpg","contentType":"image/jpeg; q=1 ","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a\u200d\u2066.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"a\u2028\ufffe.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"filename":"..\uff0fetc\uff0fpasswd","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		"{\"filename\":\"\u0301\u00a0 \u2025.jpg\",\"contentType\":\"image/jpeg\",\"size\":1,\"sha256\":\"" + fuzzDigest + "\"}",
		`{"filename":"\uff9e\u3000","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
		"{\"filename\":\"\u202egpj.exe\ufeff\",\"contentType\":\"image/jpeg\",\"size\":1,\"sha256\":\"" + fuzzDigest + "\"}",
		"{\"filename\":\"\xff.jpg\",\"contentType\":\"image/jpeg\",\"size\":1,\"sha256\":\"" + fuzzDigest + "\"}",
		`[` + strings.Repeat("[", 200) + `]`, `null`, `{}`, ``, `"x"`,
		`{"filename":"big.mov","contentType":"video/quicktime","size":21474836480,"sha256":"` + fuzzDigest + `","partSize":16777216}`,
		`{"filename":"big.mov","contentType":"video/quicktime","size":21474836480,"partSize":16777216}`,
		`{"partSize":16777216,"filename":"big.mov","contentType":"video/quicktime","size":21474836480,"sha256":""}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1}`,
		`{"filename":"big.mov","contentType":"video/quicktime","size":53687091200001,"sha256":"` + fuzzDigest + `","partSize":5368709120}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `","partSize":5242879}`,
		`{"filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `","partSize":null}`,
		`{"filename":"a.jpg","contentType":"image/*","size":1,"sha256":"` + fuzzDigest + `"}`,
		`{"Filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"` + fuzzDigest + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Add(bytes.Repeat([]byte(" "), api.MaxBodyBytes+1))
	anyType := &Config{MaxUploadBytes: 5 << 30}
	small := &Config{MaxUploadBytes: 1000, AllowedContentTypes: []string{"image/*", "application/pdf"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := api.DecodeCreateRequest(body)
		if (len(body) > api.MaxBodyBytes) != errors.Is(err, api.ErrBodyTooLarge) {
			t.Fatalf("%d-byte body: %v; want ErrBodyTooLarge exactly when over %d bytes", len(body), err, api.MaxBodyBytes)
		}
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("accepted a body that is not UTF-8 JSON: %q", body)
		}
		// Nor one that encoding/json/v2 finds invalid: a lone surrogate
		// escape, which encoding/json reads as U+FFFD, or a name twice.
		if !jsontext.Value(body).IsValid() {
			t.Fatalf("accepted a body that is not RFC 7493 JSON: %q", body)
		}
		// The strings read without encoding/json (when unescaped) are the
		// ones encoding/json reads.
		var std api.CreateRequest
		if err := json.Unmarshal(body, &std); err != nil || std.Filename != req.Filename || std.ContentType != req.ContentType || std.SHA256 != req.SHA256 {
			t.Fatalf("decoded %+v, encoding/json %+v (%v)", req, std, err)
		}
		canon, err := validateCreate(req, anyType)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}

		name := canon.Filename
		if name != req.Filename {
			t.Fatalf("filename %q changed to %q; it is stored as sent", req.Filename, name)
		}
		if name == "" || len(name) > api.MaxFilenameLen || !utf8.ValidString(name) || !acceptableName(name) || !acceptableName(norm.NFKC.String(name)) {
			t.Fatalf("accepted filename %q (NFKC %q)", name, norm.NFKC.String(name))
		}
		if canon.ContentType != req.ContentType {
			t.Fatalf("contentType %q changed to %q; it is signed exactly as sent", req.ContentType, canon.ContentType)
		}
		if strings.Trim(canon.ContentType, " \t\r\n") != canon.ContentType {
			t.Fatalf("accepted contentType %q: a header would not carry its white space", canon.ContentType)
		}
		mt, _, err := mime.ParseMediaType(canon.ContentType)
		if err != nil || strings.Count(mt, "/") != 1 || len(canon.ContentType) > api.MaxMediaTypeLen || strings.ContainsAny(canon.ContentType, "\r\n\x00") {
			t.Fatalf("accepted contentType %q (%q, %v)", canon.ContentType, mt, err)
		}
		if canon.Size < 1 || canon.Size > anyType.MaxUploadBytes {
			t.Fatalf("accepted size %d", canon.Size)
		}
		switch {
		case canon.SHA256 == "" && canon.PartSize == 0:
			t.Fatalf("accepted a single PUT without sha256: %q", body)
		case canon.SHA256 != "" && (canon.SHA256 != strings.ToLower(req.SHA256) || len(canon.SHA256) != 64 || !isLowerHex(canon.SHA256)):
			t.Fatalf("sha256 %q canonicalized to %q", req.SHA256, canon.SHA256)
		}

		fp := fingerprint("tenant", canon)
		for i, other := range [][]byte{
			respell(req, [4]int{0, 1, 2, 3}, "", false, strings.ToLower),
			respell(req, [4]int{3, 2, 1, 0}, " ", true, strings.ToUpper),
			respell(req, [4]int{2, 0, 3, 1}, "\r\n\t ", false, mixedCase),
			respell(canon, [4]int{1, 3, 0, 2}, "\n", true, strings.ToUpper),
		} {
			r2, err := api.DecodeCreateRequest(other)
			if err == nil {
				r2, err = validateCreate(r2, anyType)
			}
			if err != nil {
				t.Fatalf("spelling %d of an accepted request refused: %v\nfirst %q\nthen  %q", i, err, body, other)
			}
			if r2 != canon || fingerprint("tenant", r2) != fp {
				t.Fatalf("spelling %d changed the request: %+v, want %+v\nfirst %q\nthen  %q", i, r2, canon, body, other)
			}
		}
		if fingerprint("tenant2", canon) == fp {
			t.Fatal("the fingerprint ignores the tenant")
		}
		changed := canon
		changed.Size++
		if fingerprint("tenant", changed) == fp {
			t.Fatal("the fingerprint ignores the size")
		}
		if canon.PartSize != 0 {
			toggled := canon
			toggled.SHA256 = fuzzDigest
			if canon.SHA256 != "" {
				toggled.SHA256 = ""
			}
			if fingerprint("tenant", toggled) == fp {
				t.Fatal("the same multipart create with and without sha256 has one fingerprint")
			}
		}

		// A narrower deployment refuses by its limits only, never by a
		// different reading of the same request.
		narrow, err := validateCreate(req, small)
		switch {
		case canon.Size > small.MaxUploadBytes:
			if !errors.Is(err, ErrFileTooLarge) {
				t.Fatalf("size %d over %d: %v, want ErrFileTooLarge", canon.Size, small.MaxUploadBytes, err)
			}
		case err == nil:
			if narrow != canon {
				t.Fatalf("narrow deployment read %+v, want %+v", narrow, canon)
			}
		case !errors.Is(err, ErrUnsupportedMedia):
			t.Fatalf("narrow deployment: %v, want nil or ErrUnsupportedMedia", err)
		}
	})
}

// acceptableName is the filename rule, restated for the fuzz target: a base
// name, not . or .., no character of Cc, Cf, Zl, Zp or Cs nor a
// noncharacter, no leading mark, not only white space.
func acceptableName(name string) bool {
	if name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return false
	}
	blank := true
	for i, r := range name {
		nonchar := r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe
		if nonchar || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Cs) || i == 0 && unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me) {
			return false
		}
		blank = blank && unicode.Is(unicode.White_Space, r)
	}
	return !blank
}

func FuzzParseUploadID(f *testing.F) {
	const good = "0123456789abcdef0123456789abcdef" + "fedcba9876543210fedcba9876543210"
	for _, seed := range []string{good, "", good[:63], good + "0", strings.ToUpper(good), good[:63] + "g",
		"../" + good[3:], good[:32] + "/" + good[33:], " " + good[1:], good[:40] + "\x00" + good[41:]} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseUploadID(s)
		want := len(s) == UploadIDLen && isLowerHex(s)
		if (err == nil) != want {
			t.Fatalf("ParseUploadID(%q) = %q, %v; want accepted=%v (64 lower-case hex)", s, id, err, want)
		}
		if err != nil {
			return
		}
		if string(id) != s[:idempotency.IDLen] {
			t.Fatalf("ParseUploadID(%q) = %q, want its first %d characters", s, id, idempotency.IDLen)
		}
		if _, err := idempotency.ParseID(string(id)); err != nil {
			t.Fatalf("ParseUploadID(%q) returned an id the store refuses: %v", s, err)
		}
		random, _ := hex.DecodeString(s[idempotency.IDLen:])
		back, err := newUploadID(id, bytes.NewReader(random))
		if err != nil || back != s {
			t.Fatalf("round trip of %q gave %q, %v", s, back, err)
		}
	})
}

var _ ObjectAPI = (*s3fake.Client)(nil)

// heldObject is an S3 bucket holding at most one object: size bytes at
// key (none when key is "", which S3 cannot hold).
func heldObject(key string, size int64) *s3fake.Client {
	c := &s3fake.Client{}
	if key != "" {
		c.Put(key, s3.HeadObjectOutput{ContentLength: aws.Int64(size), ETag: aws.String(`"etag"`)})
	}
	return c
}

// The one live upload of FuzzFinalizeObjectKey: tenant-a's key
// fuzz-finalize-key-0001 with 16 random bytes of 0xab, so its id is fixed
// and seeds can name it.
const (
	fuzzFinalizeTenant = "tenant-a"
	fuzzFinalizeKey    = "fuzz-finalize-key-0001"
	fuzzFinalizeSize   = 1234
	fuzzFinalizeBucket = "fuzz-bucket"
)

var fuzzFinalizePrefixes = []string{"uploads/", "", "in box+/é/"}

// newFinalizeFixture is a service on an in-memory store and the bucket
// objects, with the live upload created; it returns the upload id.
func newFinalizeFixture(t testing.TB, presigner Presigner, prefix string, objects ObjectAPI) (*Service, *memorystore.Store, string) {
	t.Helper()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := testenv.NewClock(now).Now
	store := memorystore.New(func(o *idempotency.Options) { o.Now = clock })
	cfg := Config{Bucket: fuzzFinalizeBucket, Prefix: prefix, PresignTTL: 15 * time.Minute, MaxUploadBytes: 1 << 20}
	svc := New(store, presigner, objects, cfg, func(o *Options) {
		o.Random = bytes.NewReader(bytes.Repeat([]byte{0xab}, 16))
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	reply, err := svc.Create(context.Background(), fuzzFinalizeTenant, fuzzFinalizeKey,
		api.CreateRequest{Filename: "a.txt", ContentType: "text/plain", Size: fuzzFinalizeSize, SHA256: fuzzDigest})
	if err != nil {
		t.Fatal(err)
	}
	return svc, store, reply.UploadID
}

// FuzzFinalizeObjectKey feeds Finalize arbitrary object keys and sizes, of
// objects S3 holds: only the exact key prefix+uploadId of the live claim in
// the right bucket touches it, with the claimed size completing it;
// everything else is skipped without an error. The same event for an object
// S3 does not hold (forged, or stale) is skipped and leaves the claim
// pending.
func FuzzFinalizeObjectKey(f *testing.F) {
	live := string(idempotency.NewID(fuzzFinalizeTenant, fuzzFinalizeKey)) + strings.Repeat("ab", 16)
	for _, seed := range []string{
		"uploads/" + live, live, "in box+/é/" + live, "uploads/uploads/" + live, "UPLOADS/" + live, "uploads/" + strings.ToUpper(live),
		"uploads/" + live + "/", "uploads/" + live + ".jpg", "uploads/" + live[:63], "uploads//" + live, "/uploads/" + live,
		"uploads/../uploads/" + live, "uploads/" + live[:32] + strings.Repeat("0", 32), "uploads/" + strings.Repeat("0", 32) + live[32:], "",
	} {
		f.Add(seed, int64(fuzzFinalizeSize), true)
		f.Add(seed, int64(fuzzFinalizeSize+1), true)
	}
	f.Add("uploads/"+live, int64(fuzzFinalizeSize), false)
	f.Add("uploads/"+live, int64(-1), true)
	// The real presigner (pure CPU), built once: it keeps no state.
	presigner := NewPresigner(s3.New(s3.Options{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}),
		fuzzFinalizeBucket)
	f.Fuzz(func(t *testing.T, key string, size int64, sameBucket bool) {
		ctx := context.Background()
		for _, prefix := range fuzzFinalizePrefixes {
			svc, store, uploadID := newFinalizeFixture(t, presigner, prefix, heldObject(key, size))
			if uploadID != live {
				t.Fatalf("live upload id %s, want %s", uploadID, live)
			}
			bucket := fuzzFinalizeBucket
			if !sameBucket {
				bucket = "another-bucket"
			}
			obj := ObjectCreated{Bucket: bucket, Key: key, Size: size, ETag: `"etag"`, Time: time.Now()}
			outcome, err := svc.Finalize(ctx, obj)
			if err != nil {
				t.Fatalf("prefix %q: Finalize(%q, %d) returned an error: %v", prefix, key, size, err)
			}
			exact := sameBucket && key == prefix+live
			want := OutcomeSkipped
			switch {
			case exact && size == fuzzFinalizeSize:
				want = OutcomeCompleted
			case exact:
				want = OutcomeRejected
			}
			if outcome != want {
				t.Fatalf("prefix %q: Finalize(%s %q, %d) = %s, want %s", prefix, bucket, key, size, outcome, want)
			}
			rec, err := store.Get(ctx, idempotency.ID(live[:idempotency.IDLen]))
			if err != nil {
				t.Fatal(err)
			}
			if (rec.State == idempotency.StateCompleted) != (want == OutcomeCompleted) || store.Len() != 1 {
				t.Fatalf("prefix %q: after %s the record is %s (%d records)", prefix, outcome, rec.State, store.Len())
			}
			if want == OutcomeCompleted {
				if again, err := svc.Finalize(ctx, obj); err != nil || again != OutcomeDuplicate {
					t.Fatalf("prefix %q: repeated event = %s, %v; want duplicate", prefix, again, err)
				}
			}

			svc, store, _ = newFinalizeFixture(t, presigner, prefix, &s3fake.Client{})
			if outcome, err := svc.Finalize(ctx, obj); err != nil || outcome != OutcomeSkipped {
				t.Fatalf("prefix %q: Finalize(%s %q, %d) of an object S3 does not hold = %s, %v; want skipped", prefix, bucket, key, size, outcome, err)
			}
			if rec, err := store.Get(ctx, idempotency.ID(live[:idempotency.IDLen])); err != nil || rec.State != recordstore.StatePending {
				t.Fatalf("prefix %q: after an event without an object the record is %s, %v; want pending", prefix, rec.State, err)
			}
		}
	})
}

func isLowerHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}
