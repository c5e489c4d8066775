package upload

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
)

// tokenParam is the query parameter of a presigned URL that carries the
// signer's session token: on Lambda about a thousand base64 characters,
// which URL-encoding widens, and most of a pending record's size.
const tokenParam = "X-Amz-Security-Token="

// compactURL cuts a presigned URL for its record: the object key, which
// the record derives from its upload id, out of the path, and most of the
// session token out of the query, returned as the bytes its base64
// encodes (three quarters of its length, and none of URL-encoding's
// widening). The token's last quantum stays in the URL as it was: only
// whole quanta before it are sure to decode and encode back unchanged (the
// last may carry padding, or spare bits an encoder need not clear). ok is
// false when expandURL would not give back rawURL byte for byte (a key the
// signer escaped, a token that is not base64): such a URL is recorded
// whole, in the body.
func compactURL(rawURL, key string) (cut string, token []byte, ok bool) {
	q := strings.IndexByte(rawURL, '?')
	if q < 0 || !strings.HasSuffix(rawURL[:q], "/"+key) {
		return "", nil, false
	}
	cut = rawURL[:q-len(key)] + rawURL[q:]
	if start := strings.Index(cut, tokenParam); start >= 0 {
		start += len(tokenParam)
		end := strings.IndexByte(cut[start:], '&')
		if end < 0 {
			end = len(cut)
		} else {
			end += start
		}
		raw, err := url.QueryUnescape(cut[start:end])
		if err != nil {
			return "", nil, false
		}
		head := raw[:max(len(raw)-1, 0)/4*4]
		if token, err = base64.StdEncoding.DecodeString(head); err != nil {
			return "", nil, false
		}
		escaped := url.QueryEscape(head)
		if !strings.HasPrefix(cut[start:end], escaped) {
			return "", nil, false
		}
		cut = cut[:start] + cut[start+len(escaped):]
		return cut, token, expandURL(cut, token, key) == rawURL
	}
	// Cut at the end of a path that ends with the key, the key goes back
	// where it was: nothing to check.
	return cut, nil, true
}

// expandURL is the URL that compactURL cut into cut and token.
func expandURL(cut string, token []byte, key string) string {
	q := strings.IndexByte(cut, '?')
	if q < 0 {
		return cut
	}
	u := cut[:q] + key + cut[q:]
	if len(token) == 0 {
		return u
	}
	at := strings.Index(u, tokenParam) + len(tokenParam)
	return u[:at] + url.QueryEscape(base64.StdEncoding.EncodeToString(token)) + u[at:]
}

// putHeaders are the headers a pending single PUT's URL signs, as
// putInstructions lists them (S3Presigner signs these and no others), so a
// record need not hold them.
func putHeaders(contentType, sum string) map[string]string {
	h := map[string]string{"If-None-Match": "*"}
	if contentType != "" {
		h["Content-Type"] = contentType
	}
	if b, err := hex.DecodeString(sum); err == nil && len(b) > 0 {
		h["x-amz-checksum-sha256"] = base64.StdEncoding.EncodeToString(b)
	}
	return h
}

// sameHeaders reports whether h is putHeaders(contentType, sum), without
// making that map on every create.
func sameHeaders(h map[string]string, contentType, sum string) bool {
	want := 2
	if contentType != "" {
		want++
		if h["Content-Type"] != contentType {
			return false
		}
	}
	if len(h) != want || h["If-None-Match"] != "*" {
		return false
	}
	b, err := hex.DecodeString(sum)
	return err == nil && len(b) > 0 && h["x-amz-checksum-sha256"] == base64.StdEncoding.EncodeToString(b)
}

// compactPut fills f with the cut form of put, the instructions of u's
// pending body, and reports whether recordedBody will rebuild that body
// from the record byte for byte. When it cannot, f is left as it was and
// the record holds the body.
func compactPut(f *uploadrecord.Fields, u api.Upload, put *api.PutInstructions) bool {
	if put.Method != http.MethodPut || !sameHeaders(put.Headers, u.ContentType, u.SHA256) {
		return false
	}
	cut, token, ok := compactURL(put.URL, u.StorageKey)
	if !ok {
		return false
	}
	f.PutURL, f.PutToken = cut, token
	return true
}

// recordedBody is the pending body a single PUT's record answers with, and
// when its URL stops working: the body as recorded (a former record, or
// one whose URL could not be cut), or rebuilt from the record's fields and
// URL as Create rendered it. ok is false for a record with neither.
func recordedBody(s *uploadrecord.Stored) (body []byte, expires time.Time, ok bool, err error) {
	if len(s.Response.Body) > 0 {
		expires, err := time.Parse(timeFormat, s.URLExpires)
		return s.Response.Body, expires, err == nil, nil
	}
	if s.PutURL == "" {
		return nil, time.Time{}, false, nil
	}
	u := s.Upload()
	put := api.PutInstructions{Method: http.MethodPut, URL: expandURL(s.PutURL, s.PutToken, s.ObjectKey), Headers: putHeaders(u.ContentType, u.SHA256)}
	expires, err = presignedExpiry(put.URL)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	put.ExpiresAt = expires.Format(timeFormat)
	u.Upload = &put
	body, err = encode(u)
	return body, expires, err == nil, err
}
