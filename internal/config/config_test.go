package config

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// with is base with the overrides.
func with(base map[string]string, overrides map[string]string) map[string]string {
	m := maps.Clone(base)
	maps.Copy(m, overrides)
	return m
}

// wantLoad checks that load reads want from env.
func wantLoad[T any](t *testing.T, load func(func(string) (string, bool)) (T, error), env map[string]string, want T) {
	t.Helper()
	got, err := load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%T from %v = %+v, %v\nwant %+v", want, env, got, err, want)
	}
}

var required = map[string]string{"TABLE_NAME": "t", "BUCKET_NAME": "b"}

// defaultService is the service's section when only the required
// variables are set.
var defaultService = Service{
	MetricsNamespace: "onceupload", Table: "t", IdempotencyTTL: 24 * time.Hour,
	Upload: Upload{Bucket: "b", Prefix: "uploads/", PresignTTL: 15 * time.Minute, AbortIncompleteAfter: 2 * 24 * time.Hour,
		MaxUploadBytes: 53687091200000, MaxPendingMultipart: 100},
}

func TestLoadPresign(t *testing.T) {
	t.Parallel()
	overridden := Service{
		MetricsNamespace: "uploads-prod", Table: "t", IdempotencyTTL: 72 * time.Hour, S3ForcePathStyle: true,
		Upload: Upload{Bucket: "b", Prefix: "in/", PresignTTL: 5 * time.Minute, AbortIncompleteAfter: 7 * 24 * time.Hour,
			MaxUploadBytes: 1 << 20, MaxPendingMultipart: 0, AllowedContentTypes: []string{"image/*", "application/pdf"}},
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Presign
	}{
		{"defaults", required, Presign{Service: defaultService}},
		{"blank is unset", with(required, map[string]string{"UPLOAD_PREFIX": " ", "ALLOW_ANONYMOUS": "", "S3_FORCE_PATH_STYLE": ""}), Presign{Service: defaultService}},
		{"overrides", with(required, map[string]string{
			"UPLOAD_PREFIX": "in/", "IDEMPOTENCY_TTL": "72h", "PRESIGN_TTL": "5m", "MAX_UPLOAD_BYTES": "1048576",
			"ALLOWED_CONTENT_TYPES": " image/* , Application/PDF ,", "ALLOW_ANONYMOUS": "true", "MAX_PENDING_MULTIPART_PER_TENANT": "0",
			"ABORT_INCOMPLETE_DAYS": "7", "S3_FORCE_PATH_STYLE": "true", "METRICS_NAMESPACE": "uploads-prod",
		}), Presign{Service: overridden, AllowAnonymous: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantLoad(t, LoadPresign, tc.env, tc.want) })
	}
}

func TestLoadFinalize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Finalize
	}{
		{"defaults", required, Finalize{Service: defaultService}},
		// ALLOW_ANONYMOUS is the presign function's: finalize starts whatever it holds.
		{"another function's setting", with(required, map[string]string{"ALLOW_ANONYMOUS": "maybe"}), Finalize{Service: defaultService}},
		{"path style", with(required, map[string]string{"S3_FORCE_PATH_STYLE": "1"}), Finalize{Service: func() Service {
			s := defaultService
			s.S3ForcePathStyle = true
			return s
		}()}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantLoad(t, LoadFinalize, tc.env, tc.want) })
	}
}

func TestLoadEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Events
	}{
		// The events name the bucket; the table and the upload service's
		// settings are not this function's, valid or not.
		{"defaults", map[string]string{"BUCKET_NAME": "b"}, Events{Bucket: "b", Bus: "default", Source: "onceupload"}},
		{"other functions' settings", map[string]string{"BUCKET_NAME": "b", "MAX_UPLOAD_BYTES": "lots", "IDEMPOTENCY_TTL": "1 day"},
			Events{Bucket: "b", Bus: "default", Source: "onceupload"}},
		{"overrides", map[string]string{"BUCKET_NAME": "b", "EVENT_BUS_NAME": " uploads ", "EVENT_SOURCE": "com.example.uploads"},
			Events{Bucket: "b", Bus: "uploads", Source: "com.example.uploads"}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantLoad(t, LoadEvents, tc.env, tc.want) })
	}
}

// Each section reports every problem of its variables at once, naming
// each.
func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"IDEMPOTENCY_TTL": "1 day", "PRESIGN_TTL": "-1m", "MAX_UPLOAD_BYTES": "53687091200001", "ABORT_INCOMPLETE_DAYS": "0",
		"ALLOWED_CONTENT_TYPES": "image", "ALLOW_ANONYMOUS": "maybe", "UPLOAD_PREFIX": "/abs",
		"MAX_PENDING_MULTIPART_PER_TENANT": "-1", "S3_FORCE_PATH_STYLE": "sometimes", "EVENT_SOURCE": "aws.s3",
	}
	service := []string{"TABLE_NAME", "BUCKET_NAME", "IDEMPOTENCY_TTL", "PRESIGN_TTL", "MAX_UPLOAD_BYTES", "ALLOWED_CONTENT_TYPES",
		"UPLOAD_PREFIX", "ABORT_INCOMPLETE_DAYS", "MAX_PENDING_MULTIPART_PER_TENANT", "S3_FORCE_PATH_STYLE"}
	for _, tc := range []struct {
		name     string
		load     func(func(string) (string, bool)) error
		want     []string
		wantNone []string
	}{
		{"presign", func(l func(string) (string, bool)) error { _, err := LoadPresign(l); return err },
			append(slices.Clone(service), "ALLOW_ANONYMOUS"), []string{"EVENT_SOURCE"}},
		{"finalize", func(l func(string) (string, bool)) error { _, err := LoadFinalize(l); return err },
			service, []string{"ALLOW_ANONYMOUS", "EVENT_SOURCE"}},
		{"events", func(l func(string) (string, bool)) error { _, err := LoadEvents(l); return err },
			[]string{"BUCKET_NAME", "EVENT_SOURCE"}, []string{"TABLE_NAME", "IDEMPOTENCY_TTL", "ALLOW_ANONYMOUS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load(env(bad))
			if err == nil {
				t.Fatal("accepted invalid values")
			}
			for _, name := range tc.want {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error does not mention %s: %v", name, err)
				}
			}
			for _, name := range tc.wantNone {
				if strings.Contains(err.Error(), name) {
					t.Errorf("error mentions %s, not this function's: %v", name, err)
				}
			}
		})
	}
}

// The refusals as an operator reads them.
func TestRefusalWording(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"S3_FORCE_PATH_STYLE": "sometimes"}, `invalid configuration: S3_FORCE_PATH_STYLE="sometimes": want true or false`},
		{map[string]string{"ALLOW_ANONYMOUS": "maybe"}, `invalid configuration: ALLOW_ANONYMOUS="maybe": want true or false`},
		{map[string]string{"TABLE_NAME": ""}, `invalid configuration: TABLE_NAME is required`},
		{map[string]string{"PRESIGN_TTL": "8d"}, `invalid configuration: PRESIGN_TTL="8d": want a positive Go duration such as 15m`},
		{map[string]string{"PRESIGN_TTL": "169h"}, `invalid configuration: PRESIGN_TTL=169h0m0s: SigV4 presigned URLs last at most 7 days`},
	} {
		if _, err := LoadPresign(env(with(required, tc.env))); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %s", tc.env, err, tc.want)
		}
	}
	if _, err := LoadEvents(env(map[string]string{"BUCKET_NAME": "b", "EVENT_SOURCE": "aws.s3"})); err == nil ||
		err.Error() != `invalid configuration: EVENT_SOURCE="aws.s3": sources starting with "aws." are AWS's own` {
		t.Errorf("EVENT_SOURCE=aws.s3: %v", err)
	}
}

// A PRESIGN_TTL longer than IDEMPOTENCY_TTL works (URLs are cut to their
// claim's life) but earns a warning; IDEMPOTENCY_TTL=5s must keep working.
func TestPresignLongerThanKeysWarns(t *testing.T) {
	t.Parallel()
	c, err := LoadPresign(env(with(required, map[string]string{"IDEMPOTENCY_TTL": "5s"})))
	if err != nil {
		t.Fatal(err)
	}
	if c.IdempotencyTTL != 5*time.Second || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "PRESIGN_TTL=15m0s is longer than IDEMPOTENCY_TTL=5s") {
		t.Fatalf("IdempotencyTTL %s, warnings %q", c.IdempotencyTTL, c.Warnings)
	}
	if c, err := LoadFinalize(env(required)); err != nil || len(c.Warnings) != 0 {
		t.Fatalf("defaults: %v, warnings %q", err, c.Warnings)
	}
}

func TestKeysMustNotOutliveUnfinishedUploads(t *testing.T) {
	t.Parallel()
	m := with(required, map[string]string{"IDEMPOTENCY_TTL": "192h", "ABORT_INCOMPLETE_DAYS": "7"})
	_, err := LoadPresign(env(m))
	if err == nil || !strings.Contains(err.Error(), "raise ABORT_INCOMPLETE_DAYS to at least 8 (9 leaves an active upload a day more)") {
		t.Fatalf("8 days of keys with a 7-day abort rule: %v", err)
	}
	m["ABORT_INCOMPLETE_DAYS"] = "8"
	if _, err := LoadPresign(env(m)); err != nil {
		t.Fatal(err)
	}
}

// Unless set, the bucket's rule is a day past the keys' window, in whole
// days: an upload whose key expired keeps its parts no longer than that.
func TestAbortRuleDefaultsToADayPastTheKeys(t *testing.T) {
	t.Parallel()
	for ttl, days := range map[string]int{"5s": 2, "24h": 2, "25h": 3, "48h": 3, "72h": 4, "192h": 9} {
		c, err := LoadFinalize(env(with(required, map[string]string{"IDEMPOTENCY_TTL": ttl})))
		if err != nil || c.Upload.AbortIncompleteAfter != time.Duration(days)*24*time.Hour {
			t.Errorf("IDEMPOTENCY_TTL=%s: abort after %s, %v; want %d days", ttl, c.Upload.AbortIncompleteAfter, err, days)
		}
	}
}

func TestMaxPendingMultipart(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]int{"0": 0, "1": 1, "100": 100, "10000": 10000, " 7 ": 7} {
		c, err := LoadPresign(env(with(required, map[string]string{"MAX_PENDING_MULTIPART_PER_TENANT": value})))
		if err != nil || c.Upload.MaxPendingMultipart != want {
			t.Errorf("MAX_PENDING_MULTIPART_PER_TENANT=%q: %d, %v; want %d", value, c.Upload.MaxPendingMultipart, err, want)
		}
	}
	for _, value := range []string{"-1", "10001", "1.5", "many", "1e3"} {
		_, err := LoadPresign(env(with(required, map[string]string{"MAX_PENDING_MULTIPART_PER_TENANT": value})))
		if err == nil || !strings.Contains(err.Error(), "MAX_PENDING_MULTIPART_PER_TENANT=") || !strings.Contains(err.Error(), "0 (no cap) to 10000") {
			t.Errorf("MAX_PENDING_MULTIPART_PER_TENANT=%q: %v, want a clear refusal", value, err)
		}
	}
}

// sections are the functions' loaders, and the variables each reads.
var sections = []struct {
	name  string
	load  func(func(string) (string, bool)) error
	reads []string
}{
	{"presign", func(l func(string) (string, bool)) error { _, err := LoadPresign(l); return err }, []string{
		"ABORT_INCOMPLETE_DAYS", "ALLOWED_CONTENT_TYPES", "ALLOW_ANONYMOUS", "BUCKET_NAME", "IDEMPOTENCY_TTL", "MAX_PENDING_MULTIPART_PER_TENANT",
		"MAX_UPLOAD_BYTES", "METRICS_NAMESPACE", "PRESIGN_TTL", "S3_FORCE_PATH_STYLE", "TABLE_NAME", "UPLOAD_PREFIX",
	}},
	{"finalize", func(l func(string) (string, bool)) error { _, err := LoadFinalize(l); return err }, []string{
		"ABORT_INCOMPLETE_DAYS", "ALLOWED_CONTENT_TYPES", "BUCKET_NAME", "IDEMPOTENCY_TTL", "MAX_PENDING_MULTIPART_PER_TENANT",
		"MAX_UPLOAD_BYTES", "METRICS_NAMESPACE", "PRESIGN_TTL", "S3_FORCE_PATH_STYLE", "TABLE_NAME", "UPLOAD_PREFIX",
	}},
	{"events", func(l func(string) (string, bool)) error { _, err := LoadEvents(l); return err }, []string{
		"BUCKET_NAME", "EVENT_BUS_NAME", "EVENT_SOURCE",
	}},
}

// Each function reads the variables of its section, no more, and each is
// one the configuration docs (docs/operating.md's) name.
func TestEachSectionReadsDocumentedVariables(t *testing.T) {
	t.Parallel()
	var docs []string
	for _, path := range []string{"../../docs/operating.md"} {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, section, ok := strings.Cut(string(text), "\n## Configuration\n")
		section, _, _ = strings.Cut(section, "\n## ")
		if !ok {
			t.Fatalf("%s has no Configuration section", path)
		}
		docs = append(docs, section)
	}
	for _, s := range sections {
		read := map[string]bool{}
		_ = s.load(func(name string) (string, bool) { read[name] = true; return "", false })
		if got := slices.Sorted(maps.Keys(read)); !slices.Equal(got, s.reads) {
			t.Errorf("the %s section reads %v, want %v", s.name, got, s.reads)
		}
		for _, name := range s.reads {
			for i, doc := range docs {
				if !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, "`"+name+"=") {
					t.Errorf("%s (the %s section's) is not in the Configuration section of %s", name, s.name, []string{"docs/operating.md"}[i])
				}
			}
		}
	}
}
