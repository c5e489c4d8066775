package client

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// NormalizeBaseURL returns the one spelling of an API's base URL that a
// client keeps (New builds every request on it; the upload CLI's state
// file knows an upload by it). Spellings that differ only in the case of
// the scheme and host, a default port (:80 for http, :443 for https), or
// trailing or doubled slashes in the path are the same API:
// http://127.0.0.1:3000, http://127.0.0.1:3000/ and HTTP://127.0.0.1:3000//
// are all http://127.0.0.1:3000, and https://API.example.com:443//v1/ is
// https://api.example.com/v1. Percent-escapes in the path are kept as they
// were written (the server may tell %2F from /).
//
// It does not resolve names: another host name for the same server
// (localhost and 127.0.0.1, a custom domain and the execute-api one) is
// another API, and a file uploaded through one is uploaded afresh through
// the other.
//
// Only an absolute http or https URL is an API's base URL: one without a
// scheme or host, with another scheme, with user info, a query or a
// fragment, whitespace or a backslash is an error. The browser client's
// normalizeBaseUrl (web/src/baseurl.ts) follows the same rules; both are
// tested against pkg/api/testdata/base-urls.json.
func NormalizeBaseURL(raw string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("client: base URL %q: %s; want http(s)://host[:port][/path]", raw, why)
	}
	if !strings.Contains(raw, "://") {
		return bad("not an absolute URL (no http:// or https://)")
	}
	// A browser reads a backslash as a slash and drops surrounding
	// whitespace; refused here, both clients read every base URL alike.
	if i := strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }); i >= 0 {
		return bad(fmt.Sprintf("%q at byte %d (no whitespace, control characters or backslashes)", raw[i], i))
	}
	u, err := url.Parse(raw)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without url.Error's repeat of the URL
		}
		return bad(err.Error())
	}
	// url.Parse has lower-cased the scheme.
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("scheme " + strconv.Quote(u.Scheme) + " is not http or https")
	case u.User != nil:
		raw = u.Redacted() // the message must not repeat a password
		return bad("user info in the URL (give credentials as a token)")
	case u.RawQuery != "" || u.ForceQuery:
		return bad("a query (?…) is not part of a base URL")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("a fragment (#…) is not part of a base URL")
	case u.Hostname() == "":
		return bad("no host")
	}

	host := u.Hostname()
	// An IPv6 zone (fe80::1%eth0) names an interface: its case is kept.
	zone := ""
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host, zone = host[:i], host[i:]
	}
	host = strings.ToLower(host) + zone
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("port " + p + " is out of range")
		}
		if !(u.Scheme == "http" && n == 80 || u.Scheme == "https" && n == 443) {
			host += ":" + strconv.Itoa(n)
		}
	}

	// The path is worked on as written (escaped), so that %2F stays %2F
	// and is not taken for a slash.
	path := u.EscapedPath()
	for strings.Contains(path, "//") {
		path = strings.ReplaceAll(path, "//", "/")
	}
	path = strings.TrimSuffix(path, "/")
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return bad(err.Error())
	}
	norm := &url.URL{Scheme: u.Scheme, Host: host, Path: unescaped, RawPath: path}
	return norm.String(), nil
}
