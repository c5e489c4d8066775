package upload

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"mime"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/onceupload/onceupload/pkg/api"
)

// validateCreate checks r's values against the contract and the
// deployment's limits and returns r with sha256 in lower case, the form
// that is fingerprinted, recorded and answered.
func validateCreate(r api.CreateRequest, cfg *Config) (api.CreateRequest, error) {
	if err := validFilename(r.Filename); err != nil {
		return r, err
	}
	mediaType, err := validMediaType(r.ContentType)
	if err != nil {
		return r, err
	}
	if r.Size < 1 {
		return r, invalid("size", "size must be at least 1")
	}
	switch {
	case r.SHA256 == "" && r.PartSize == 0:
		return r, api.ErrSHA256Required
	case r.SHA256 != "" && (len(r.SHA256) != 64 || !api.IsHex(r.SHA256)):
		return r, api.ErrSHA256Format
	}
	if r.PartSize != 0 && (r.PartSize < api.MinPartSize || r.PartSize > api.MaxPartSize) {
		return r, api.ErrPartSizeRange
	}
	// Malformed fields (400) first, then the deployment's limits (413, 415).
	// The size limit comes before the part count, which relates size to
	// partSize: a size over the limit is a 413, not advice on cutting it
	// (past 10,000 parts of 5 GiB, that advice named a part size beyond
	// the maximum). Under the limit, which is at most that, the advice
	// always names a part size that exists.
	if r.Size > cfg.MaxUploadBytes {
		return r, ErrFileTooLarge
	}
	if r.PartSize != 0 {
		if n := api.PartCount(r.Size, r.PartSize); n > api.MaxParts {
			return r, invalid("partSize", "partSize %d cuts size %d into %d parts; at most %d are allowed, so use at least %d",
				r.PartSize, r.Size, n, api.MaxParts, (r.Size+api.MaxParts-1)/api.MaxParts)
		}
	}
	if r.PartSize == 0 && r.Size > api.MaxSinglePutBytes {
		return r, ErrNeedsParts
	}
	if !cfg.Allows(mediaType) {
		return r, ErrUnsupportedMedia
	}
	r.SHA256 = strings.ToLower(r.SHA256)
	return r, nil
}

// validFilename checks a create's filename: 1 to MaxFilenameLen bytes of
// UTF-8 that pass filenameText both as sent and in their NFKC form. NFKC
// folds compatibility characters into what they stand for (U+FF0F
// FULLWIDTH SOLIDUS into "/", U+2025 TWO DOT LEADER into ".."), and
// whatever later normalizes the name (a search index, a file system, an
// archiver, a person's tool) reads that form: "..／etc／passwd" must not be
// a path there either. The name is stored and fingerprinted as sent; only
// its length is of the name as sent (NFKC may lengthen it, and it is never
// stored).
func validFilename(name string) error {
	switch {
	case name == "":
		return invalid("filename", "filename must not be empty")
	case len(name) > api.MaxFilenameLen:
		return invalid("filename", "filename must be at most %d bytes", api.MaxFilenameLen)
	case !utf8.ValidString(name):
		// Valid UTF-8 holds no surrogate (category Cs): this refuses them.
		return invalid("filename", "filename must be valid UTF-8")
	}
	if err := filenameText(name, ""); err != nil {
		return err
	}
	if folded := norm.NFKC.String(name); folded != name {
		return filenameText(folded, " in its NFKC form (compatibility characters read as what they stand for: U+FF0F FULLWIDTH SOLIDUS as /)")
	}
	return nil
}

// filenameText checks the text of a filename (in the form named by form,
// which the message says): a base name, not . or .., without characters
// that hide or break what it shows (categories Cc, Cf, Zl, Zp and the
// noncharacters), not starting with a combining mark (it would join
// whatever a page puts before it), and not blank: at least one character
// outside White_Space, since a name of spaces or NBSP renders as nothing.
func filenameText(name, form string) error {
	switch {
	case name == "." || name == "..":
		return invalid("filename", "filename%s must not be . or ..", form)
	case strings.ContainsAny(name, `/\`):
		return invalid("filename", "filename%s must be a base name, without / or \\", form)
	}
	for _, r := range name {
		switch {
		case unicode.Is(unicode.Cc, r):
			return invalid("filename", "filename%s must not contain control characters", form)
		case isFormat(r):
			return invalid("filename", "filename%s must not contain invisible format characters such as U+202E (right-to-left override) or U+200D (zero-width joiner)", form)
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return invalid("filename", "filename%s must not contain the line and paragraph separators U+2028 and U+2029", form)
		case unicode.Is(unicode.Noncharacter_Code_Point, r):
			return invalid("filename", "filename%s must not contain noncharacters (U+FDD0 to U+FDEF, U+FFFE and U+FFFF, and the last two of every plane)", form)
		}
	}
	if first, _ := utf8.DecodeRuneInString(name); unicode.Is(unicode.M, first) {
		return invalid("filename", "filename%s must not start with a combining mark", form)
	}
	if strings.IndexFunc(name, func(r rune) bool { return !unicode.Is(unicode.White_Space, r) }) < 0 {
		return invalid("filename", "filename%s must contain a character other than white space", form)
	}
	return nil
}

// isFormat reports whether r is a Unicode format character (category Cf):
// invisible, yet it changes how a name shows. The bidi controls (U+202A to
// U+202E, U+2066 to U+2069, U+200E, U+200F, U+061C) reorder it, so that
// "\u202egpj.exe" shows as "exe.jpg"; zero-width characters (U+200B to
// U+200D, U+2060, U+FEFF) and the soft hyphen make two names that look
// the same differ. The whole category, not a list of the known tricks: it
// grows with Unicode. The price is a few names that use one for what it is
// for (U+200C in Persian words, U+200D joining an emoji sequence such as a
// family or a flag); a client can drop it, and the name still reads.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

// validMediaType checks contentType is a type/subtype (parameters allowed)
// that can be sent as a header, and returns the lower-case type/subtype.
// White space at either end is refused, not trimmed: a header cannot carry
// it (HTTP drops white space around a field value, SigV4 trims it before
// signing, so S3 stores "image/png" for " image/png"), and
// mime.ParseMediaType ignores it, so " image/png" and "image/png" would be
// two requests, with two fingerprints, for one object; the one form
// accepted is the one recorded, signed and answered.
func validMediaType(ct string) (string, error) {
	if ct == "" || len(ct) > api.MaxMediaTypeLen {
		return "", invalid("contentType", "contentType must be a media type of 1 to %d characters", api.MaxMediaTypeLen)
	}
	if strings.Trim(ct, " \t\r\n") != ct {
		return "", invalid("contentType", "contentType must not begin or end with white space")
	}
	for i := 0; i < len(ct); i++ {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return "", invalid("contentType", "contentType must be printable ASCII")
		}
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", invalid("contentType", "contentType must be a media type such as image/jpeg")
	}
	typ, sub, ok := strings.Cut(mediaType, "/")
	if !ok || typ == "" || sub == "" || strings.Contains(sub, "/") {
		return "", invalid("contentType", "contentType must be a media type such as image/jpeg")
	}
	if strings.Contains(mediaType, "*") {
		return "", invalid("contentType", "contentType must be one media type, not a range such as image/*")
	}
	return mediaType, nil
}

// fingerprint identifies a request for one key: method, route, tenant and
// the fields as validateCreate returns them, each length-prefixed so no
// field can bleed into the next. Never the raw JSON text, so whitespace
// and key order do not count.
// partSize counts only when set, so single-PUT fingerprints are as before.
// A multipart create without sha256 has "" in its place: every request
// that gives one keeps the fingerprint it always had, and none that gives
// one (64 characters, length-prefixed) can share a fingerprint with one
// that does not.
func fingerprint(tenant string, r api.CreateRequest) string {
	h := sha256.New()
	parts := []string{"POST", "/uploads", tenant, r.Filename, r.ContentType, strconv.FormatInt(r.Size, 10), r.SHA256}
	if r.PartSize != 0 {
		parts = append(parts, "partSize", strconv.FormatInt(r.PartSize, 10))
	}
	for _, part := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}
