package devstack

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Identity of the local API, as it appears in events.
const (
	localAccountID = "000000000000" // also the account of the bus's events and S3's records
	localAPIID     = "local"
	// LocalTenant is the principal of requests without a bearer token.
	LocalTenant = "local"
	// maxPayload is API Gateway's request payload limit.
	maxPayload = 10 << 20
)

// matchRoute finds the route for method and path, filling its {params}.
// The path matches exactly, as API Gateway HTTP APIs match routes: segment
// by segment, none empty, so "/uploads/{id}/" (a trailing slash) and
// "//uploads" are no route, and a {param} is never "". The front door must
// not be more tolerant than AWS: a client that works here must work there.
func matchRoute(routes []Route, method, path string) (Route, map[string]string, bool) {
	segs := strings.Split(path, "/")
	for _, r := range routes {
		if r.Method != method && r.Method != "ANY" {
			continue
		}
		want := strings.Split(r.Path, "/")
		if len(want) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for i, w := range want {
			if strings.HasPrefix(w, "{") && strings.HasSuffix(w, "}") && segs[i] != "" {
				params[w[1:len(w)-1]] = segs[i]
			} else if w != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			if len(params) == 0 {
				params = nil
			}
			return r, params, true
		}
	}
	return Route{}, nil, false
}

// buildEvent turns an HTTP request into the payload format 2.0 event that
// API Gateway HTTP APIs send to Lambda: headers lower-cased and repeated
// values joined with commas, cookies apart, query parameters joined with
// commas, binary bodies base64-encoded, the JWT authorizer's claims in the
// request context.
func buildEvent(r *http.Request, route Route, params map[string]string, claims map[string]string, body []byte, now time.Time, requestID string) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	for name, values := range r.Header {
		lower := strings.ToLower(name)
		if lower == "cookie" {
			continue
		}
		headers[lower] = strings.Join(values, ",")
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	if len(body) > 0 || r.ContentLength >= 0 {
		headers["content-length"] = strconv.Itoa(len(body))
	}
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = map[string]string{}
		for k, v := range q {
			query[k] = strings.Join(v, ",")
		}
	}
	sourceIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	headers["x-forwarded-for"] = sourceIP
	headers["x-forwarded-proto"] = "http"
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              route.Key(),
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     route.Key(),
			AccountID:    localAccountID,
			Stage:        "$default",
			RequestID:    requestID,
			APIID:        localAPIID,
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: sourceIP, UserAgent: r.UserAgent(),
			},
		},
	}
	if claims != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	}
	if len(body) > 0 {
		// A text body that is not valid UTF-8 cannot travel as a JSON
		// string (encoding would replace its bytes with U+FFFD): it goes in
		// base64, so the function sees the bytes that were sent.
		if isTextual(r.Header.Get("Content-Type")) && utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

// eventJSON encodes ev as API Gateway sends it, in one pass:
// events.APIGatewayV2HTTPRequest alone would add requestContext.authentication
// (sent only with mutual TLS) and drop jwt.scopes, which AWS sends as null.
func eventJSON(ev events.APIGatewayV2HTTPRequest) ([]byte, error) {
	type jwt struct {
		Claims map[string]string `json:"claims"`
		Scopes []string          `json:"scopes"`
	}
	type authorizer struct {
		JWT *jwt `json:"jwt,omitempty"`
	}
	type requestContext struct {
		RouteKey     string                                               `json:"routeKey"`
		AccountID    string                                               `json:"accountId"`
		Stage        string                                               `json:"stage"`
		RequestID    string                                               `json:"requestId"`
		Authorizer   *authorizer                                          `json:"authorizer,omitempty"`
		APIID        string                                               `json:"apiId"`
		DomainName   string                                               `json:"domainName"`
		DomainPrefix string                                               `json:"domainPrefix"`
		Time         string                                               `json:"time"`
		TimeEpoch    int64                                                `json:"timeEpoch"`
		HTTP         events.APIGatewayV2HTTPRequestContextHTTPDescription `json:"http"`
	}
	type event struct {
		Version               string            `json:"version"`
		RouteKey              string            `json:"routeKey"`
		RawPath               string            `json:"rawPath"`
		RawQueryString        string            `json:"rawQueryString"`
		Cookies               []string          `json:"cookies,omitempty"`
		Headers               map[string]string `json:"headers"`
		QueryStringParameters map[string]string `json:"queryStringParameters,omitempty"`
		PathParameters        map[string]string `json:"pathParameters,omitempty"`
		RequestContext        requestContext    `json:"requestContext"`
		Body                  string            `json:"body,omitempty"`
		IsBase64Encoded       bool              `json:"isBase64Encoded"`
	}
	rc := ev.RequestContext
	out := event{
		Version: ev.Version, RouteKey: ev.RouteKey, RawPath: ev.RawPath, RawQueryString: ev.RawQueryString,
		Cookies: ev.Cookies, Headers: ev.Headers, QueryStringParameters: ev.QueryStringParameters,
		PathParameters: ev.PathParameters, Body: ev.Body, IsBase64Encoded: ev.IsBase64Encoded,
		RequestContext: requestContext{
			RouteKey: rc.RouteKey, AccountID: rc.AccountID, Stage: rc.Stage, RequestID: rc.RequestID,
			APIID: rc.APIID, DomainName: rc.DomainName, DomainPrefix: rc.DomainPrefix, Time: rc.Time,
			TimeEpoch: rc.TimeEpoch, HTTP: rc.HTTP,
		},
	}
	if rc.Authorizer != nil && rc.Authorizer.JWT != nil {
		out.RequestContext.Authorizer = &authorizer{JWT: &jwt{Claims: rc.Authorizer.JWT.Claims, Scopes: rc.Authorizer.JWT.Scopes}}
	}
	return json.Marshal(out)
}

// isTextual: API Gateway passes these bodies as text, others base64.
func isTextual(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/javascript" ||
		mt == "application/x-www-form-urlencoded"
}

// jwtClaims plays the JWT authorizer locally: the claims of a bearer token,
// signature NOT checked; no token acts as tenant "local". Claims become
// strings, as API Gateway passes them.
func jwtClaims(authorization string) (map[string]string, error) {
	if authorization == "" {
		return map[string]string{"sub": LocalTenant}, nil
	}
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	parts := strings.Split(strings.TrimSpace(token), ".")
	if !ok || len(parts) != 3 {
		return nil, fmt.Errorf("not a bearer JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(payload, &raw); err != nil {
		return nil, fmt.Errorf("JWT payload: %w", err)
	}
	claims := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			claims[k] = v
		case float64:
			claims[k] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			b, _ := json.Marshal(v)
			claims[k] = string(b)
		}
	}
	if claims["sub"] == "" {
		return nil, fmt.Errorf("JWT has no sub claim")
	}
	return claims, nil
}

// writeResponse writes a function's payload format 2.0 response. A result
// without a statusCode is, as API Gateway treats it, a 200 JSON body.
func writeResponse(w http.ResponseWriter, payload []byte) error {
	var resp struct {
		events.APIGatewayV2HTTPResponse
		StatusCode *int `json:"statusCode"` // nil: not a proxy response
	}
	if json.Unmarshal(payload, &resp) != nil || resp.StatusCode == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(payload)
		return err
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return fmt.Errorf("function response body: %w", err)
		}
	}
	if w.Header().Get("Content-Type") == "" && len(body) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(*resp.StatusCode)
	_, err := w.Write(body)
	return err
}

// apiMessage answers as API Gateway itself does: {"message": "..."}.
func apiMessage(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": message})
}

// cors applies the HTTP API's CorsConfiguration: it answers preflights
// itself and adds the allow/expose headers to other responses. It returns
// true when the request was a preflight, now answered.
func (s *APISpec) cors(w http.ResponseWriter, r *http.Request, origins []string) bool {
	origin := r.Header.Get("Origin")
	allowed := origin != "" && (slices.Contains(origins, "*") || slices.Contains(origins, origin))
	allowOrigin := origin
	if slices.Contains(origins, "*") {
		allowOrigin = "*"
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !preflight {
		if allowed {
			w.Header().Set("Access-Control-Allow-Origin", allowOrigin)
			if len(s.ExposeHeaders) > 0 {
				w.Header().Set("Access-Control-Expose-Headers", strings.Join(lower(s.ExposeHeaders), ","))
			}
		}
		return false
	}
	if allowed && s.preflightAllowed(r) {
		w.Header().Set("Access-Control-Allow-Origin", allowOrigin)
		w.Header().Set("Access-Control-Allow-Methods", strings.Join(s.AllowMethods, ","))
		w.Header().Set("Access-Control-Allow-Headers", strings.Join(lower(s.AllowHeaders), ","))
		if s.MaxAge > 0 {
			w.Header().Set("Access-Control-Max-Age", strconv.Itoa(s.MaxAge))
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}

func (s *APISpec) preflightAllowed(r *http.Request) bool {
	method := r.Header.Get("Access-Control-Request-Method")
	if !slices.ContainsFunc(s.AllowMethods, func(m string) bool { return strings.EqualFold(m, method) || m == "*" }) {
		return false
	}
	for _, h := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		h = strings.TrimSpace(h)
		if h != "" && !slices.ContainsFunc(s.AllowHeaders, func(a string) bool { return strings.EqualFold(a, h) || a == "*" }) {
			return false
		}
	}
	return true
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
}
