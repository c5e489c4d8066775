package wiring_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
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
