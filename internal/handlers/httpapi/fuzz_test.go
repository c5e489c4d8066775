package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/onceupload/onceupload/internal/upload"
	"github.com/onceupload/onceupload/pkg/api"
)

// Routes FuzzHandle can take.
const (
	fuzzRoutePost      = iota // POST /uploads
	fuzzRouteStatus           // GET /uploads/{uploadId}, the id from the body
	fuzzRouteStatusRaw        // GET with only a raw path, as some callers send
	fuzzRouteCount
)

// FuzzHandle sends the presign handler arbitrary header values, bodies and
// principals. Every answer is JSON with a status of the contract's table (docs/api.md), an
// error body holds only error and message and no Go error text, a fresh
// store is never a reason for a 5xx, and only a 201 stores a record (and
// replays byte for byte).
func FuzzHandle(f *testing.F) {
	f.Add(key, "application/json", photo, false, "user-1", uint8(fuzzRoutePost))
	f.Add(`"`+key+`"`, "application/json; charset=utf-8", base64.StdEncoding.EncodeToString([]byte(photo)), true, "user-1", uint8(fuzzRoutePost))
	f.Add(" \t"+key, "text/plain", strings.Replace(photo, digest, strings.ToUpper(digest), 1), false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "", strings.Replace(photo, "image/jpeg", "image/png; q=\"a b\"", 1), false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", strings.Replace(photo, "image/jpeg", "text/html", 1), false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", strings.Replace(photo, "48213", "99999999999", 1), false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", strings.Replace(photo, `"size"`, `"json: x":1,"size"`, 1), false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", `{"filename":"a.jpg","contentType":"image/jpeg","size":1,"sha256":"`+digest+`"`, false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", "{not base64", true, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", strings.Repeat("[", 10000), false, "user-1", uint8(fuzzRoutePost))
	f.Add(key, "application/json", photo, false, "", uint8(fuzzRoutePost))
	f.Add("short", "application/json", photo, false, "user-1", uint8(fuzzRoutePost))
	f.Add(`"abcdefgh\ijklmnop"`, "application/json", photo, false, "user-1", uint8(fuzzRoutePost))
	f.Add("abcdefghijklmnop\r\nX-Injected: 1", "image/png\r\n", photo, false, "user-1", uint8(fuzzRoutePost))
	f.Add("", "", strings.Repeat("0", 64), false, "user-1", uint8(fuzzRouteStatus))
	f.Add("", "", "../../etc/passwd", false, "user-1", uint8(fuzzRouteStatusRaw))
	f.Add("", "", "", false, "", uint8(fuzzRouteStatus))
	f.Fuzz(func(t *testing.T, idemKey, contentType, reqBody string, isBase64 bool, sub string, route uint8) {
		fx := newFixture(t, nil)
		req := post(idemKey, reqBody)
		if idemKey == "" {
			delete(req.Headers, "idempotency-key")
		}
		req.Headers["content-type"] = contentType
		req.IsBase64Encoded = isBase64
		req.RequestContext.Authorizer.JWT.Claims["sub"] = sub
		switch route % fuzzRouteCount {
		case fuzzRouteStatus:
			req = get(reqBody, sub)
		case fuzzRouteStatusRaw:
			req = get(reqBody, sub)
			req.RouteKey, req.PathParameters = "", nil
		}
		resp, err := fx.handler.Handle(context.Background(), req)
		if err != nil {
			t.Fatalf("Handle returned an error: %v", err)
		}
		code := checkResponse(t, resp)
		if resp.StatusCode >= 500 {
			t.Fatalf("%d %s on an in-memory store: a client's input caused a server error", resp.StatusCode, code)
		}
		stored := fx.store.Len()
		if resp.StatusCode != 201 {
			if stored != 0 {
				t.Fatalf("%d %s stored %d records", resp.StatusCode, code, stored)
			}
			return
		}
		if route%fuzzRouteCount != fuzzRoutePost || stored != 1 {
			t.Fatalf("201 on route %d with %d records stored", route%fuzzRouteCount, stored)
		}
		var u api.Upload
		if err := json.Unmarshal([]byte(resp.Body), &u); err != nil || u.Status != api.StatusPending || u.Upload == nil {
			t.Fatalf("201 body %s: %v", resp.Body, err)
		}
		if _, err := upload.ParseUploadID(u.UploadID); err != nil || resp.Headers["Location"] != "/uploads/"+u.UploadID ||
			u.StorageKey != "uploads/"+u.UploadID {
			t.Fatalf("201 with upload id %q, Location %q, storage key %q", u.UploadID, resp.Headers["Location"], u.StorageKey)
		}
		again, err := fx.handler.Handle(context.Background(), req)
		if err != nil || again.StatusCode != 201 || again.Body != resp.Body || again.Headers["Idempotent-Replay"] != "true" || fx.store.Len() != 1 {
			t.Fatalf("replay = %d %s (replay header %q, %d records), %v; want the same body",
				again.StatusCode, again.Body, again.Headers["Idempotent-Replay"], fx.store.Len(), err)
		}
		status, err := fx.handler.Handle(context.Background(), get(u.UploadID, sub))
		if err != nil || status.StatusCode != 200 || status.Body != resp.Body {
			t.Fatalf("status of the new upload = %d %s, %v", status.StatusCode, status.Body, err)
		}
		if other, _ := fx.handler.Handle(context.Background(), get(u.UploadID, sub+"x")); other.StatusCode != 404 {
			t.Fatalf("another tenant's status of the new upload = %d %s, want 404", other.StatusCode, other.Body)
		}
	})
}
