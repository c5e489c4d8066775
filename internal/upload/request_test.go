package upload

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/onceupload/onceupload/internal/upload/uploadrecord"
	"github.com/onceupload/onceupload/pkg/api"
)

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestDecodeAndValidate(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 1000, AllowedContentTypes: []string{"image/*", "application/pdf"}}
	cases := []struct {
		name  string
		body  string
		field string // for a *api.RequestError
		err   error  // for a sentinel
	}{
		{"valid", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"parameters allowed", `{"filename":"a.pdf","contentType":"application/pdf; x=y","size":1000,"sha256":"` + strings.ToUpper(sha) + `"}`, "", nil},
		{"unicode filename", `{"filename":"résumé 2026 (final).png","contentType":"image/png","size":5,"sha256":"` + sha + `"}`, "", nil},
		{"not json", `filename=a`, "body", nil},
		{"empty", ``, "body", nil},
		{"array", `[]`, "body", nil},
		{"null", `null`, "body", nil},
		{"member twice", `{"filename":"a.png","filename":"b.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"member given twice within a value", `{"filename":{"a":1,"a":2},"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"escaped member name", `{"\u0066ilename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"member name in another case", `{"Filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "body", nil},
		{"null filename", `{"filename":null,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"media range", `{"filename":"a.png","contentType":"image/*","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"any media", `{"filename":"a.png","contentType":"*/*","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"part size too small", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","partSize":5242879}`, "partSize", nil},
		{"part size zero", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","partSize":0}`, "partSize", nil},
		{"part size not a number", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","partSize":"5MiB"}`, "partSize", nil},
		{"two objects", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"} {}`, "body", nil},
		{"unknown field", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","extra":1}`, "body", nil},
		{"invalid utf-8", "{\"filename\":\"a\xff.png\",\"contentType\":\"image/png\",\"size\":1,\"sha256\":\"" + sha + "\"}", "body", nil},
		{"missing filename", `{"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"missing size", `{"filename":"a.png","contentType":"image/png","sha256":"` + sha + `"}`, "size", nil},
		{"filename wrong type", `{"filename":1,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"deep nesting", `{"filename":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`, "filename", nil},
		{"empty filename", `{"filename":"","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"dot", `{"filename":".","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"dot dot", `{"filename":"..","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"path", `{"filename":"../etc/passwd","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"backslash", `{"filename":"a\\b.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"nul", `{"filename":"a\u0000.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"newline", `{"filename":"a\n.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"too long", `{"filename":"` + strings.Repeat("é", 128) + `","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"no subtype", `{"filename":"a.png","contentType":"image","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"empty type", `{"filename":"a.png","contentType":"","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"header injection", `{"filename":"a.png","contentType":"image/png\r\nx: y","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"size zero", `{"filename":"a.png","contentType":"image/png","size":0,"sha256":"` + sha + `"}`, "size", nil},
		{"size negative", `{"filename":"a.png","contentType":"image/png","size":-5,"sha256":"` + sha + `"}`, "size", nil},
		{"size fraction", `{"filename":"a.png","contentType":"image/png","size":1.5,"sha256":"` + sha + `"}`, "size", nil},
		{"size exponent", `{"filename":"a.png","contentType":"image/png","size":1e3,"sha256":"` + sha + `"}`, "size", nil},
		{"size string", `{"filename":"a.png","contentType":"image/png","size":"1","sha256":"` + sha + `"}`, "size", nil},
		{"sha short", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"abc"}`, "sha256", nil},
		{"sha missing without partSize", `{"filename":"a.png","contentType":"image/png","size":1}`, "sha256", nil},
		{"sha missing with partSize", `{"filename":"a.png","contentType":"image/png","size":1000,"partSize":5242880}`, "", nil},
		{"sha empty with partSize", `{"filename":"a.png","contentType":"image/png","size":1000,"sha256":"","partSize":5242880}`, "sha256", nil},
		{"sha null with partSize", `{"filename":"a.png","contentType":"image/png","size":1000,"sha256":null,"partSize":5242880}`, "sha256", nil},
		{"sha short with partSize", `{"filename":"a.png","contentType":"image/png","size":1000,"sha256":"abc","partSize":5242880}`, "sha256", nil},
		{"sha not hex", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + strings.Repeat("g", 64) + `"}`, "sha256", nil},
		{"size over max", `{"filename":"a.png","contentType":"image/png","size":1001,"sha256":"` + sha + `"}`, "", ErrFileTooLarge},
		{"size over int64", `{"filename":"a.png","contentType":"image/png","size":99999999999999999999999,"sha256":"` + sha + `"}`, "", ErrFileTooLarge},
		{"type not allowed", `{"filename":"a.txt","contentType":"text/plain","size":1,"sha256":"` + sha + `"}`, "", ErrUnsupportedMedia},
		{"body too large", `{"filename":"` + strings.Repeat("a", api.MaxBodyBytes) + `"}`, "", api.ErrBodyTooLarge},

		// A surrogate escape counts only as half of a high-low pair: alone
		// it would read as U+FFFD, and two bodies as one.
		{"escaped surrogate pair", `{"filename":"a\ud83d\ude00.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"lone high surrogate", `{"filename":"a\ud800.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"lone low surrogate", `{"filename":"a\udfff.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"high surrogate at the end", `{"filename":"a.png\uD800","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"high surrogate before another escape", `{"filename":"a\ud800\u0041.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"two high surrogates", `{"filename":"a\ud800\ud800.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"surrogates low then high", `{"filename":"a\udc00\ud800.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"lone surrogate in contentType", `{"filename":"a.png","contentType":"image/png\ud800","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"lone surrogate in sha256", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"\udc00` + sha[1:] + `"}`, "sha256", nil},
		{"lone surrogate in a member name", `{"filename":"a.png","contentType":"image/png","size":1,"sha256":"` + sha + `","\ud800":1}`, "body", nil},

		// contentType exactly as a header carries it.
		{"contentType leading space", `{"filename":"a.png","contentType":" image/png","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType trailing space", `{"filename":"a.png","contentType":"image/png ","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType trailing space after a parameter", `{"filename":"a.pdf","contentType":"application/pdf; x=y ","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType trailing tab", `{"filename":"a.png","contentType":"image/png\t","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType leading newline", `{"filename":"a.png","contentType":"\nimage/png","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType all spaces", `{"filename":"a.png","contentType":"   ","size":1,"sha256":"` + sha + `"}`, "contentType", nil},
		{"contentType space inside parameters", `{"filename":"a.pdf","contentType":"application/pdf ; x=y","size":1,"sha256":"` + sha + `"}`, "", nil},

		// Unicode format characters (Cf): invisible, they change how a name
		// shows.
		{"filename right-to-left override", `{"filename":"\u202egpj.exe","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename raw right-to-left override", "{\"filename\":\"\u202egpj.exe\",\"contentType\":\"image/png\",\"size\":1,\"sha256\":\"" + sha + "\"}", "filename", nil},
		{"filename left-to-right embedding", `{"filename":"a\u202a.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename right-to-left isolate", `{"filename":"a\u2067.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename right-to-left mark", `{"filename":"a\u200f.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename arabic letter mark", `{"filename":"a\u061c.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename zero-width space", `{"filename":"a\u200b.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename zero-width joiner", `{"filename":"a\u200d.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename zero-width non-joiner", `{"filename":"a\u200c.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename word joiner", `{"filename":"a\u2060.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename byte order mark", `{"filename":"\ufeffa.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename soft hyphen", `{"filename":"a\u00adb.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename tag character", `{"filename":"a\udb40\udc01.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "filename", nil},
		{"filename emoji", `{"filename":"🎉 party.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
		{"filename right-to-left script", `{"filename":"שלום.png","contentType":"image/png","size":1,"sha256":"` + sha + `"}`, "", nil},
	}
	for _, tc := range cases {
		req, err := api.DecodeCreateRequest([]byte(tc.body))
		if err == nil {
			_, err = validateCreate(req, cfg)
		}
		var v *api.RequestError
		switch {
		case tc.field == "" && tc.err == nil:
			if err != nil {
				t.Errorf("%s: err = %v, want accepted", tc.name, err)
			}
		case tc.field != "":
			if !errors.As(err, &v) || v.Field != tc.field || !strings.Contains(v.Message, strings.Split(tc.field, " ")[0]) && tc.field != "body" {
				t.Errorf("%s: err = %#v, want a validation error on %s", tc.name, err, tc.field)
			}
		case !errors.Is(err, tc.err):
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
}

// A size over the deployment's limit is ErrFileTooLarge (413) whatever
// partSize says: the limit is checked before the part count, which was a
// 400 advising a part size above 5 GiB. Under the limit, too many parts is
// still that 400, and its advice is a part size that exists.
func TestSizeLimitBeforePartCount(t *testing.T) {
	t.Parallel()
	most := &Config{MaxUploadBytes: api.MaxMultipartBytes}
	gib := &Config{MaxUploadBytes: 1 << 30}
	for _, tc := range []struct {
		name     string
		cfg      *Config
		size     int64
		partSize int64
		err      error  // a sentinel
		message  string // else this partSize refusal
	}{
		{"past 10,000 parts of 5 GiB, largest parts", most, api.MaxMultipartBytes + 1, api.MaxPartSize, ErrFileTooLarge, ""},
		{"past 10,000 parts of 5 GiB, smallest parts", most, api.MaxMultipartBytes + 1, api.MinPartSize, ErrFileTooLarge, ""},
		{"over a 1 GiB limit in too many parts", gib, 1 << 40, api.MinPartSize, ErrFileTooLarge, ""},
		{"over a 1 GiB limit in few parts", gib, 2 << 30, api.MaxPartSize, ErrFileTooLarge, ""},
		{"at the limit in too many parts", most, api.MaxMultipartBytes, api.MinPartSize, nil,
			"partSize 5242880 cuts size 53687091200000 into 10240000 parts; at most 10000 are allowed, so use at least 5368709120."},
		{"at the limit in 10,000 parts", most, api.MaxMultipartBytes, api.MaxPartSize, nil, ""},
	} {
		_, err := validateCreate(api.CreateRequest{Filename: "big.mov", ContentType: "video/quicktime", Size: tc.size, PartSize: tc.partSize}, tc.cfg)
		var v *api.RequestError
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
		case tc.message != "":
			if !errors.As(err, &v) || v.Field != "partSize" || v.Message != tc.message {
				t.Errorf("%s: %v, want %q on partSize", tc.name, err, tc.message)
			}
		case err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		}
	}
}

// contentType is recorded, signed and answered as sent, so it is refused
// with white space at either end rather than trimmed: a header cannot carry
// that space, and " image/png" must not be a second request for the
// object "image/png" names.
func TestContentTypeWhiteSpace(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 10}
	for _, ct := range []string{" image/png", "image/png ", "\timage/png", "image/png\r\n", "image/png; a=b ", "  "} {
		_, err := validateCreate(api.CreateRequest{Filename: "a.png", ContentType: ct, Size: 1, SHA256: sha}, cfg)
		var v *api.RequestError
		if !errors.As(err, &v) || v.Field != "contentType" {
			t.Errorf("contentType %q: err = %v, want a validation error on contentType", ct, err)
		}
	}
	_, err := validateCreate(api.CreateRequest{Filename: "a.png", ContentType: " image/png", Size: 1, SHA256: sha}, cfg)
	if err == nil || err.Error() != "contentType must not begin or end with white space." {
		t.Errorf("leading space: %v", err)
	}
	for _, ct := range []string{"image/png", "image/png; a=b", "image/png ;a=b", `image/png; a="b c"`} {
		r, err := validateCreate(api.CreateRequest{Filename: "a.png", ContentType: ct, Size: 1, SHA256: sha}, cfg)
		if err != nil || r.ContentType != ct {
			t.Errorf("contentType %q: %q, %v; want it accepted as sent", ct, r.ContentType, err)
		}
	}
}

// Every Unicode format character (category Cf) is refused in a filename,
// raw or escaped; what is printed, in any script, is not.
func TestFilenameFormatCharacters(t *testing.T) {
	t.Parallel()
	n := 0
	for _, r16 := range unicode.Cf.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			checkFormatRefused(t, r)
			n++
		}
	}
	for _, r32 := range unicode.Cf.R32 {
		for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
			checkFormatRefused(t, r)
			n++
		}
	}
	if n < 150 {
		t.Fatalf("checked %d format characters; the table has more", n)
	}
	for _, name := range []string{"résumé.pdf", "שלום.png", "مرحبا.png", "写真.jpg", "🎉.png", "a\u00a0b.png", "a-b_c (1).tar.gz"} {
		if err := validFilename(name); err != nil {
			t.Errorf("validFilename(%q) = %v", name, err)
		}
	}
}

func checkFormatRefused(t *testing.T, r rune) {
	t.Helper()
	const want = "filename must not contain invisible format characters such as U+202E (right-to-left override) or U+200D (zero-width joiner)."
	name := "a" + string(r) + ".png"
	if err := validFilename(name); err == nil || err.Error() != want {
		t.Errorf("validFilename(%q) (U+%04X) = %v, want %q", name, r, err, want)
	}
	for _, raw := range []string{jsonQuote(name, false), jsonQuote(name, true)} { // raw, then \uXXXX
		req, err := api.DecodeCreateRequest([]byte(`{"filename":` + raw + `,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`))
		if err == nil {
			_, err = validateCreate(req, &Config{MaxUploadBytes: 10})
		}
		if err == nil || err.Error() != want {
			t.Errorf("filename %s (U+%04X): %v, want %q", raw, r, err, want)
		}
	}
}

// The filename rule of issue 33: its NFKC form must be a base name too; no
// line or paragraph separator, noncharacter, leading mark or blank name.
// Each was a 201 before; each is now a 400 naming filename, sent raw or
// escaped, and the names people write, in any script, still pass.
func TestFilenameRule(t *testing.T) {
	t.Parallel()
	const nfkc = " in its NFKC form (compatibility characters read as what they stand for: U+FF0F FULLWIDTH SOLIDUS as /)"
	refused := []struct {
		name, filename, want string
	}{
		{"line separator", "a\u2028b.png", "filename must not contain the line and paragraph separators U+2028 and U+2029."},
		{"paragraph separator", "a\u2029b.png", "filename must not contain the line and paragraph separators U+2028 and U+2029."},
		{"noncharacter U+FFFE", "a\ufffe.png", "filename must not contain noncharacters (U+FDD0 to U+FDEF, U+FFFE and U+FFFF, and the last two of every plane)."},
		{"noncharacter U+FFFF", "\uffff.png", "filename must not contain noncharacters (U+FDD0 to U+FDEF, U+FFFE and U+FFFF, and the last two of every plane)."},
		{"noncharacter U+FDD0", "a\ufdd0.png", "filename must not contain noncharacters (U+FDD0 to U+FDEF, U+FFFE and U+FFFF, and the last two of every plane)."},
		{"noncharacter U+10FFFF", "a\U0010ffff.png", "filename must not contain noncharacters (U+FDD0 to U+FDEF, U+FFFE and U+FFFF, and the last two of every plane)."},
		{"noncharacter U+1FFFE", "a\U0001fffe.png", "filename must not contain noncharacters (U+FDD0 to U+FDEF, U+FFFE and U+FFFF, and the last two of every plane)."},
		{"only spaces", "   ", "filename must contain a character other than white space."},
		{"one space", " ", "filename must contain a character other than white space."},
		{"only NBSP", "\u00a0\u00a0", "filename must contain a character other than white space."},
		{"only ideographic spaces", "\u3000", "filename must contain a character other than white space."},
		{"leading combining mark", "\u0301a.png", "filename must not start with a combining mark."},
		{"leading enclosing mark", "\u20dd.png", "filename must not start with a combining mark."},
		{"fullwidth solidus path", "..\uff0fetc\uff0fpasswd", "filename" + nfkc + " must be a base name, without / or \\."},
		{"fullwidth reverse solidus", "a\uff3cb.png", "filename" + nfkc + " must be a base name, without / or \\."},
		{"two dot leader", "\u2025", "filename" + nfkc + " must not be . or ..."},
		{"one dot leaders", "\u2024\u2024", "filename" + nfkc + " must not be . or ..."},
		{"halfwidth voiced mark first", "\uff9ea.png", "filename" + nfkc + " must not start with a combining mark."},
		// Surrogates (Cs) cannot reach the rule: valid UTF-8 holds none.
		{"raw surrogate", "a\xed\xa0\x80.png", "filename must be valid UTF-8."},
	}
	cfg := &Config{MaxUploadBytes: 10}
	for _, tc := range refused {
		name := tc.filename
		_, err := validateCreate(api.CreateRequest{Filename: name, ContentType: "image/png", Size: 1, SHA256: sha}, cfg)
		var v *api.RequestError
		if !errors.As(err, &v) || v.Code != api.CodeInvalidRequest || v.Field != "filename" || v.Message != tc.want {
			t.Errorf("%s: filename %q: %#v, want invalid_request on filename, %q", tc.name, name, err, tc.want)
		}
		if !utf8.ValidString(name) {
			continue // no JSON body can carry it
		}
		for _, raw := range []string{jsonQuote(name, false), jsonQuote(name, true)} { // raw, then \uXXXX
			req, err := api.DecodeCreateRequest([]byte(`{"filename":` + raw + `,"contentType":"image/png","size":1,"sha256":"` + sha + `"}`))
			if err == nil {
				_, err = validateCreate(req, cfg)
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("%s: body filename %s: %v, want %q", tc.name, raw, err, tc.want)
			}
		}
	}
	for _, name := range []string{
		"résumé.pdf", "re\u0301sume\u0301.pdf", "写真 2026.jpg", "مرحبا بالعالم.png", "שלום.png", "a b.png", " a.png", "a\u00a0b.png",
		"🎉.png", "❤️ love.png", "🇫🇷.png", "ｒｅｐｏｒｔ.pdf", "ﬁle.txt", "...  .jpg", "..a", "Ⅻ.txt", "a\u0301.png",
	} {
		r, err := validateCreate(api.CreateRequest{Filename: name, ContentType: "image/png", Size: 1, SHA256: sha}, cfg)
		if err != nil || r.Filename != name {
			t.Errorf("filename %q: %q, %v; want it accepted as sent", name, r.Filename, err)
		}
	}
	// An emoji sequence joined by U+200D ZERO WIDTH JOINER is refused, as
	// the rule says (no Cf); its parts, sent apart, are not.
	if err := validFilename("👩‍💻.png"); err == nil {
		t.Error("a ZWJ emoji sequence was accepted")
	}
	if err := validFilename("👩💻.png"); err != nil {
		t.Errorf("the same emoji without the joiner: %v", err)
	}
}

// The NFKC form is only checked: the name is stored and fingerprinted as
// sent, so a fullwidth name and its ASCII form are two requests.
func TestFilenameKeptAsSent(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 10}
	wide, err := validateCreate(api.CreateRequest{Filename: "ｒｅｐｏｒｔ.pdf", ContentType: "application/pdf", Size: 1, SHA256: sha}, cfg)
	if err != nil || wide.Filename != "ｒｅｐｏｒｔ.pdf" {
		t.Fatalf("fullwidth name: %q, %v; want it as sent", wide.Filename, err)
	}
	ascii, err := validateCreate(api.CreateRequest{Filename: "report.pdf", ContentType: "application/pdf", Size: 1, SHA256: sha}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint("t", wide) == fingerprint("t", ascii) {
		t.Error("a fullwidth name has the fingerprint of its NFKC form")
	}
}

// The fingerprint is over canonical fields: whitespace, key order and the
// case of the hex digest do not change it; every field, the tenant and
// field boundaries do.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: 1 << 30}
	fp := func(tenant, body string) string {
		t.Helper()
		req, err := api.DecodeCreateRequest([]byte(body))
		if err == nil {
			req, err = validateCreate(req, cfg)
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return fingerprint(tenant, req)
	}
	base := fp("t", `{"filename":"a.png","contentType":"image/png","size":10,"sha256":"`+sha+`"}`)
	same := []string{
		`{ "sha256" : "` + strings.ToUpper(sha) + `", "size": 10, "contentType": "image/png", "filename": "a.png" }`,
		"{\n\t\"filename\":\"a.png\",\"contentType\":\"image/png\",\"size\":10,\"sha256\":\"" + sha + "\"}\n",
	}
	for _, body := range same {
		if got := fp("t", body); got != base {
			t.Errorf("%s: fingerprint changed", body)
		}
	}
	different := map[string]string{
		"tenant":      fp("u", `{"filename":"a.png","contentType":"image/png","size":10,"sha256":"`+sha+`"}`),
		"filename":    fp("t", `{"filename":"b.png","contentType":"image/png","size":10,"sha256":"`+sha+`"}`),
		"contentType": fp("t", `{"filename":"a.png","contentType":"image/jpeg","size":10,"sha256":"`+sha+`"}`),
		"size":        fp("t", `{"filename":"a.png","contentType":"image/png","size":11,"sha256":"`+sha+`"}`),
		"sha256":      fp("t", `{"filename":"a.png","contentType":"image/png","size":10,"sha256":"`+strings.Repeat("0", 64)+`"}`),
	}
	for field, got := range different {
		if got == base {
			t.Errorf("changing %s did not change the fingerprint", field)
		}
	}
	if fingerprint("ab", api.CreateRequest{Filename: "c"}) == fingerprint("a", api.CreateRequest{Filename: "bc"}) {
		t.Error("field boundaries are ambiguous")
	}
}

// Fingerprints already recorded stay valid: these are the values the
// fingerprint had before sha256 became optional for multipart creates, so
// a retry of a create made then still replays it. A multipart create
// without sha256 is a request of its own: never the fingerprint of the
// same create with one (422 idempotency_key_reuse), and stable.
func TestFingerprintOptionalSHA256(t *testing.T) {
	t.Parallel()
	const tenant = "jwt:0::tenant"
	single := api.CreateRequest{Filename: "a.png", ContentType: "image/png", Size: 10, SHA256: sha}
	multi := api.CreateRequest{Filename: "big.mov", ContentType: "video/quicktime", Size: 21474836480,
		SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", PartSize: 16777216}
	for _, tc := range []struct {
		req  api.CreateRequest
		want string
	}{
		{single, "3f3726dbc80945deba5492efac65a10f431442858834caca791db04813715ddb"},
		{multi, "a2f63a8d7a91953d87f60044a68305e8771311163d653acc4155ecc118289816"},
	} {
		if got := fingerprint(tenant, tc.req); got != tc.want {
			t.Errorf("%+v: fingerprint %s, want the one recorded before: %s", tc.req, got, tc.want)
		}
	}
	without := multi
	without.SHA256 = ""
	if fingerprint(tenant, without) == fingerprint(tenant, multi) {
		t.Error("a multipart create without sha256 has the fingerprint of the same create with one")
	}
	// Pinned too: a retry of a create made today must replay it later.
	if got, want := fingerprint(tenant, without), "48a14d34765da0c3beb7123ce0023b75ab7c2c8d06dac1acf9cbb05135ace718"; got != want {
		t.Errorf("fingerprint without sha256 %s, want %s", got, want)
	}
	other := without
	other.PartSize = 2 * multi.PartSize
	if fingerprint(tenant, other) == fingerprint(tenant, without) {
		t.Error("partSize does not count without sha256")
	}
}

// A declaration names every part of the upload exactly once, and a whole
// file sha256 at complete never contradicts the one recorded (the create's
// or an earlier complete's).
func TestCheckDeclaration(t *testing.T) {
	t.Parallel()
	const count = 25
	u := api.Upload{Multipart: &api.Multipart{PartSize: api.MinPartSize, PartCount: count}}
	all := func() []api.PartToSign {
		parts := make([]api.PartToSign, count)
		for i := range parts {
			parts[i] = api.PartToSign{PartNumber: i + 1, SHA256: sha}
		}
		return parts
	}
	withSHA := uploadrecord.Stored{Fields: uploadrecord.Fields{SHA256: sha}}
	other := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name    string
		rec     uploadrecord.Stored
		req     api.CompleteRequest
		field   string
		message string
	}{
		{"nothing declared", uploadrecord.Stored{}, api.CompleteRequest{}, "", ""},
		{"every part", uploadrecord.Stored{}, api.CompleteRequest{Parts: all()}, "", ""},
		{"every part, out of order", uploadrecord.Stored{}, api.CompleteRequest{Parts: append(all()[1:], all()[0])}, "", ""},
		{"sha256 the create gave, in upper case", withSHA, api.CompleteRequest{SHA256: strings.ToUpper(sha)}, "", ""},
		{"sha256 the create did not give", uploadrecord.Stored{}, api.CompleteRequest{SHA256: other}, "", ""},
		{"sha256 another than the one recorded", withSHA, api.CompleteRequest{SHA256: other}, "sha256",
			"sha256 differs from the sha256 recorded for this upload (given at create or by an earlier complete); complete with that one, or without sha256"},
		{"sha256 malformed", uploadrecord.Stored{}, api.CompleteRequest{SHA256: "abc"}, "sha256", "sha256 must be 64 hex characters"},
		{"part 0", uploadrecord.Stored{}, api.CompleteRequest{Parts: append(all()[1:], api.PartToSign{PartNumber: 0, SHA256: sha})}, "parts", "partNumber 0 is outside 1..25"},
		{"part beyond partCount", uploadrecord.Stored{}, api.CompleteRequest{Parts: append(all(), api.PartToSign{PartNumber: 26, SHA256: sha})}, "parts", "partNumber 26 is outside 1..25"},
		{"part twice", uploadrecord.Stored{}, api.CompleteRequest{Parts: append(all()[:24], api.PartToSign{PartNumber: 3, SHA256: sha})}, "parts", "part 3 is listed twice"},
		{"part without a digest", uploadrecord.Stored{}, api.CompleteRequest{Parts: append(all()[:24], api.PartToSign{PartNumber: 25})}, "parts", "the sha256 of part 25 must be 64 hex characters"},
		{"a part left out", uploadrecord.Stored{}, api.CompleteRequest{Parts: all()[1:]}, "parts", "parts must name every part 1..25 exactly once; it leaves out 1"},
		{"many left out", uploadrecord.Stored{}, api.CompleteRequest{Parts: all()[:3]}, "parts",
			"parts must name every part 1..25 exactly once; it leaves out 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 and 12 more"},
	} {
		err := checkDeclaration(tc.rec, u, tc.req)
		var v *api.RequestError
		switch {
		case tc.field == "":
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.name, err)
			}
		case !errors.As(err, &v) || v.Field != tc.field || v.Message != tc.message+".":
			t.Errorf("%s: err = %#v, want %s: %q", tc.name, err, tc.field, tc.message)
		}
	}
	if got := (&PartsMismatchError{Mismatched: []int{2, 9}, Count: 2}).Error(); got != "parts whose SHA-256 in S3 is not the declared one: 2, 9" {
		t.Errorf("PartsMismatchError: %q", got)
	}
	if got := (&PartsMismatchError{Mismatched: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Count: 13}).Error(); !strings.HasSuffix(got, "9, 10 and 3 more") {
		t.Errorf("PartsMismatchError: %q", got)
	}
}

func TestUploadIDs(t *testing.T) {
	t.Parallel()
	id := "0123456789abcdef0123456789abcdef"
	good := id + "fedcba9876543210fedcba9876543210"
	got, err := ParseUploadID(good)
	if err != nil || string(got) != id {
		t.Fatalf("ParseUploadID(%q) = %q, %v", good, got, err)
	}
	for _, bad := range []string{"", id, good + "0", strings.ToUpper(good), "../" + good[3:], good[:63] + "g"} {
		if _, err := ParseUploadID(bad); err == nil {
			t.Errorf("ParseUploadID(%q) accepted", bad)
		}
	}
}

func TestAllows(t *testing.T) {
	t.Parallel()
	cfg := &Config{AllowedContentTypes: []string{"image/*", "application/pdf"}}
	for mt, want := range map[string]bool{"image/png": true, "image/svg+xml": true, "application/pdf": true, "application/json": false, "text/plain": false} {
		if got := cfg.Allows(mt); got != want {
			t.Errorf("allows(%s) = %v, want %v", mt, got, want)
		}
	}
	if !(&Config{}).Allows("anything/at-all") {
		t.Error("an empty list must allow any type")
	}
}

// The decoder and the service refuse a create's part size and sha256 in
// one wording: the decoder for a body, the service for any request.
func TestOneWordingForTheSharedRefusals(t *testing.T) {
	t.Parallel()
	cfg := &Config{MaxUploadBytes: api.MaxMultipartBytes}
	for _, c := range []struct {
		body string
		req  api.CreateRequest
		want error
	}{
		{`{"filename":"a","contentType":"text/plain","size":1,"sha256":"` + sha + `","partSize":0}`,
			api.CreateRequest{Filename: "a", ContentType: "text/plain", Size: 1, SHA256: sha, PartSize: 1}, api.ErrPartSizeRange},
		{`{"filename":"a","contentType":"text/plain","size":1}`,
			api.CreateRequest{Filename: "a", ContentType: "text/plain", Size: 1}, api.ErrSHA256Required},
		{`{"filename":"a","contentType":"text/plain","size":1,"sha256":""}`,
			api.CreateRequest{Filename: "a", ContentType: "text/plain", Size: 1, SHA256: "xyz"}, api.ErrSHA256Format},
	} {
		_, decoded := api.DecodeCreateRequest([]byte(c.body))
		_, validated := validateCreate(c.req, cfg)
		if decoded != c.want || validated != c.want {
			t.Errorf("decoder %v, service %v; want both %v", decoded, validated, c.want)
		}
	}
}
