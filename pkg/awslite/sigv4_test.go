package awslite_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/onceupload/onceupload/pkg/awslite"
)

// verifySigV4 checks a request's signature as AWS does, from what the
// server received: written here from the SigV4 specification, apart from
// the SDK's signer that produced it, so that a header changed after
// signing, a body whose hash was not the one signed or a wrong scope is
// caught without a real AWS endpoint (the local DynamoDB servers do not
// check signatures).
func verifySigV4(r *http.Request, body []byte, secret string) error {
	auth := r.Header.Get("Authorization")
	const algo = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, algo) {
		return fmt.Errorf("authorization %q", auth)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, algo), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.SplitN(fields["Credential"], "/", 2)[1] // date/region/service/aws4_request
	parts := strings.Split(scope, "/")
	date, region, service := parts[0], parts[1], parts[2]
	signed := strings.Split(fields["SignedHeaders"], ";")

	payload := r.Header.Get("X-Amz-Content-Sha256")
	sum := sha256.Sum256(body)
	if payload == "" {
		payload = hex.EncodeToString(sum[:])
	} else if payload != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("x-amz-content-sha256 %s is not the body's", payload)
	}
	var canonHeaders strings.Builder
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = fmt.Sprint(r.ContentLength)
		default:
			v = strings.Join(r.Header.Values(h), ",")
		}
		canonHeaders.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	query := r.URL.Query()
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var q []string
	for _, k := range keys {
		for _, v := range query[k] {
			q = append(q, awsEscape(k)+"="+awsEscape(v))
		}
	}
	canonical := strings.Join([]string{r.Method, r.URL.EscapedPath(), strings.Join(q, "&"),
		canonHeaders.String(), fields["SignedHeaders"], payload}, "\n")
	crHash := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])
	key := []byte("AWS4" + secret)
	for _, s := range []string{date, region, service, "aws4_request"} {
		key = hmacSHA256(key, s)
	}
	if want := hex.EncodeToString(hmacSHA256(key, toSign)); want != fields["Signature"] {
		return fmt.Errorf("signature %s, want %s for\n%s", fields["Signature"], want, canonical)
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// awsEscape is SigV4's URI encoding: everything but unreserved characters.
func awsEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// Every request awslite sends, to either service, carries a signature
// that holds for what arrives.
func TestRequestsAreSignedAsSent(t *testing.T) {
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	var failures []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifySigV4(r, body, secret); err != nil {
			failures = append(failures, r.Method+" "+r.URL.String()+": "+err.Error())
		}
		switch {
		case r.Header.Get("X-Amz-Target") != "":
			io.WriteString(w, `{}`)
		case r.URL.Query().Has("uploads"):
			io.WriteString(w, `<InitiateMultipartUploadResult><UploadId>u</UploadId></InitiateMultipartUploadResult>`)
		case r.Method == http.MethodGet:
			io.WriteString(w, `<ListPartsResult></ListPartsResult>`)
		case r.Method == http.MethodPost:
			io.WriteString(w, `<CompleteMultipartUploadResult></CompleteMultipartUploadResult>`)
		}
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", secret, "session/token+=")}
	ddb, err := awslite.NewDynamoDB(cfg, func(o *awslite.Options) { o.BaseEndpoint = srv.URL })
	if err != nil {
		t.Fatal(err)
	}
	s3c, err := awslite.NewS3(cfg, func(o *awslite.Options) { o.BaseEndpoint, o.UsePathStyle = srv.URL, true })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "in/sub dir/a+b%c é~.txt"
	calls := []func() error{
		func() error {
			_, err := ddb.PutItem(ctx, &awslite.PutItemInput{TableName: "t", Item: map[string]awslite.AttributeValue{"pk": awslite.S("é & \u2028")}})
			return err
		},
		func() error {
			_, err := ddb.GetItem(ctx, &awslite.GetItemInput{TableName: "t", ConsistentRead: true})
			return err
		},
		func() error {
			_, err := s3c.HeadObject(ctx, &awslite.HeadObjectInput{Bucket: "b", Key: key, ChecksumMode: true, IfMatch: `"e"`})
			return err
		},
		func() error {
			return s3c.DeleteObject(ctx, &awslite.DeleteObjectInput{Bucket: "b", Key: key, IfMatch: `"e"`})
		},
		func() error {
			_, err := s3c.CreateMultipartUpload(ctx, &awslite.CreateMultipartUploadInput{Bucket: "b", Key: key, ContentType: "text/plain; charset=utf-8", ChecksumAlgorithm: awslite.ChecksumSHA256Algorithm})
			return err
		},
		func() error {
			_, err := s3c.ListParts(ctx, &awslite.ListPartsInput{Bucket: "b", Key: key, UploadID: "a/b+c=", MaxParts: 2, PartNumberMarker: "3"})
			return err
		},
		func() error {
			_, err := s3c.CompleteMultipartUpload(ctx, &awslite.CompleteMultipartUploadInput{Bucket: "b", Key: key, UploadID: "a/b+c=",
				Parts: []awslite.CompletedPart{{PartNumber: 1, ETag: `"e"`, ChecksumSHA256: "x"}}, MpuObjectSize: 5, IfNoneMatch: "*"})
			return err
		},
		func() error {
			return s3c.AbortMultipartUpload(ctx, &awslite.AbortMultipartUploadInput{Bucket: "b", Key: key, UploadID: "a/b+c="})
		},
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
}
