package idempotency_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quoted marks a block of docs/idempotency.md that quotes the body of an
// Example in example_test.go (or batch/example_test.go), which go test
// compiles and runs.
var quoted = regexp.MustCompile("(?s)<!-- quoted from pkg/idempotency/((?:batch/)?example_test.go): (Example\\w+) -->\n```go\n(.*?)\n```")

// The examples docs/idempotency.md shows are the Examples this package
// runs, word for word, so that what users copy compiles and does what the
// page says.
func TestDocsQuoteTheExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "idempotency.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := quoted.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 3 {
		t.Fatalf("docs/idempotency.md quotes %d examples, want the three of its migration section", len(blocks))
	}
	for _, b := range blocks {
		file, name, got := b[1], b[2], b[3]
		src, err := os.ReadFile(filepath.FromSlash(file))
		if err != nil {
			t.Fatal(err)
		}
		start := strings.Index(string(src), "\nfunc "+name+"() {\n")
		if start < 0 {
			t.Errorf("docs/idempotency.md quotes %s, which %s does not have", name, file)
			continue
		}
		body := string(src)[start+len("\nfunc "+name+"() {\n"):]
		body = body[:strings.Index(body, "\n}\n")]
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		if want := strings.Join(lines, "\n"); got != want {
			t.Errorf("docs/idempotency.md's %s is not the Example's body:\n got:\n%s\nwant:\n%s", name, got, want)
		}
	}
}
