package mdlinks

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every relative link and #anchor in every tracked Markdown file resolves.
func TestTrackedMarkdownLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	files := strings.Fields(string(out))
	if len(files) == 0 {
		t.Fatal("git ls-files lists no Markdown file")
	}
	var present []string
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			present = append(present, f) // a file deleted but not yet committed is skipped
		}
	}
	problems, err := Check(root, present)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"The two commands", "the-two-commands"},
		{"`make dev`: the system on your machine", "make-dev-the-system-on-your-machine"},
		{"Lifetimes of keys, uploads and URLs", "lifetimes-of-keys-uploads-and-urls"},
		{"Turning it off: `POWERTOOLS_IDEMPOTENCY_DISABLED`", "turning-it-off-powertools_idempotency_disabled"},
		{"Go library (`pkg/client`) and the `upload` CLI (`cmd/upload`)", "go-library-pkgclient-and-the-upload-cli-cmdupload"},
		{"Nested: one stack with onceupload", "nested-one-stack-with-onceupload"},
		{"The retry policy (the same as the Go client's)", "the-retry-policy-the-same-as-the-go-clients"},
		{"See [the API](docs/api.md) — twice", "see-the-api--twice"},
		{"Ünïcode héading", "ünïcode-héading"},
	} {
		if got := Slug(c.heading); got != c.want {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

func TestAnchorsRepeatAndExplicit(t *testing.T) {
	text := []byte("# A\n## Cost\n```\n# not a heading\n```\n## Cost\n### Cost\n<a id=\"here\"></a>\n<a name=\"there\"></a>\n")
	got := Anchors(text)
	for _, want := range []string{"a", "cost", "cost-1", "cost-2", "here", "there"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block was taken for a heading")
	}
}

func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/b.md", "# B\n## Part one\n")
	write("a.md", strings.Join([]string{
		"# A",
		"[ok](docs/b.md) [ok](docs/b.md#part-one) [ok](#a) [ok](docs) [ext](https://example.com/x#y)",
		"[gone](docs/c.md) [bad anchor](docs/b.md#part-two) [bad local](#nope)",
		"`[in code](nowhere.md)`",
		"```",
		"[in a block](nowhere.md)",
		"```",
		"[repo](" + RepoURL + "blob/main/docs/b.md#part-one) [repo gone](" + RepoURL + "blob/main/docs/x.md)",
		"[ref]: docs/missing.md",
	}, "\n"))
	problems, err := Check(dir, []string{"a.md", "docs/b.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Link)
	}
	want := []string{"docs/c.md", "docs/b.md#part-two", "#nope", RepoURL + "blob/main/docs/x.md", "docs/missing.md"}
	if !slices.Equal(got, want) {
		t.Errorf("problems %v, want %v", problems, want)
	}
}
