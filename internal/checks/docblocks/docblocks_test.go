// Package docblocks holds the test that runs the command blocks the docs
// tell a reader to paste, against a local stack, as the reader would.
package docblocks

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// root is the repository, three levels up.
var root = filepath.Join("..", "..", "..")

// needsAWS is the marker a page shows on the line before a block that
// needs an AWS account: the test skips such a block.
const needsAWS = "**Needs AWS.**"

// block is one ```sh block of a tracked Markdown file.
type block struct {
	file  string
	line  int // of its opening fence
	text  string
	isAWS bool
}

func (b block) name() string { return b.file + ":" + strconv.Itoa(b.line) }

var fence = regexp.MustCompile("^```(\\w*)\\s*$")

// blocks returns every sh block of the tracked Markdown files.
func blocks(t *testing.T) []block {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var all []block
	for _, file := range strings.Fields(string(out)) {
		if strings.Contains(file, "node_modules/") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(text), "\n")
		for i := 0; i < len(lines); i++ {
			m := fence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			end := i + 1
			for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
				end++
			}
			if m[1] == "sh" {
				prev := ""
				for j := i - 1; j >= 0; j-- {
					if strings.TrimSpace(lines[j]) != "" {
						prev = strings.TrimSpace(lines[j])
						break
					}
				}
				all = append(all, block{file: file, line: i + 1, text: strings.Join(lines[i+1:end], "\n"), isAWS: prev == needsAWS})
			}
			i = end
		}
	}
	return all
}

// A pasted block runs against the local stack; what it must print, in
// order. The key is the block's first line and its file.
var runs = map[string][]string{
	"README.md|API=http://127.0.0.1:3000": {
		"HTTP/1.1 201", "Idempotent-Replay: true", "identical bodies", `"error":"idempotency_key_reuse"`,
		"PUT 200", `"status": "completed"`, `"completed"`,
	},
	"docs/getting-started.md|API=http://127.0.0.1:3000": {
		`"partCount": 3`, "part 1: 200", "part 2: 200", "part 3: 200", `{"partNumber":3,`, `"status": "completed"`,
	},
}

// The blocks that are not pasted against a stack, and what runs them
// instead. A block the docs gain must run here, carry the AWS marker, or
// be named below with the test or the run that covers it.
var coveredElsewhere = map[string]string{
	"README.md|make dev    # runs the whole system on 127.0.0.1 (API on :3000); Ctrl-C stops it":                                                  "the two commands: make test is CI's run (.ci/run); make dev starts the stack TestPastedBlocks runs against",
	"docs/clients.md|go install ./cmd/upload                  # in the clone: builds upload into $(go env GOPATH)/bin (GOBIN if set)":             "cmd/upload's TestCLIEndToEnd runs the built command against a local stack; the block's files are the reader's",
	"docs/clients.md|cd your-module    # its go.mod, go 1.26 or later":                                                                            "a module of the reader's; the replace directive is go's own",
	"docs/idempotency.md|go get github.com/onceupload/onceupload/pkg/idempotency":                                                                 "a module of the reader's; the package's Examples run in go test",
	"web/README.md|cd web && npm pack                                   # makes onceupload-web-0.1.0.tgz (its prepack builds dist/lib)":           "web's TestBrowserPackage packs the package and installs the tarball",
	"web/README.md|make web                  # npm ci (when package-lock.json changed), npm run lint, build, test":                                "make test runs make web and TestBrowser",
	"uppy/README.md|make web-build uppy/node_modules/.installed          # in the clone":                                                          "uppy's TestUppyPlugin packs both packages and installs the tarballs into an application",
	"uppy/README.md|make uppy                 # npm ci (when package-lock.json changed), npm run lint, build, test":                               "make test runs make uppy and TestUppyPlugin",
	"docs/uppy.md|make web-build uppy/node_modules/.installed          # in the clone: builds @onceupload/web, installs the plugin's build tools": "uppy's TestUppyPlugin packs both packages and installs the tarballs into an application",
	"bench/peer/README.md|cd bench/peer && npm ci --no-audit --no-fund     # Node 20+":                                                            "make bench installs and runs the peer (cmd/bench)",
	"bench/peer/README.md|cd bench/peer": "make bench starts the peer against the local stack (cmd/bench's startPeer)",
	"web/demo/README.md|make web                  # npm ci (when the lock changed), npm run lint, npm run build (the package, then this page), npm test": "make test runs make web and TestBrowser",
	"web/demo/README.md|REQUIRE_INTEGRATION=1 WEB_BENCH_MIB=1024 go test -count=1 -v -run TestBrowserBench ./web/":                                       "a benchmark run by hand: web/bench_test.go's TestBrowserBench, which make test runs and which skips without WEB_BENCH_MIB",
	"examples/upload-events/README.md|# terminal 1: the stack, posting each event's envelope to the consumer":                                            "the consumer's TestServeHTTP serves posted envelopes; cmd/chaos runs it behind the stack's event bus",
	"examples/upload-events/README.md|curl -i -X POST http://127.0.0.1:8090/events -H 'Content-Type: application/json' -d '{":                            "the consumer's TestServeHTTP posts such envelopes",
}

func (b block) key() string {
	first, _, _ := strings.Cut(b.text, "\n")
	return b.file + "|" + first
}

// Every sh block of the docs is accounted for, and the ones a reader
// pastes against make dev's stack run against one and print what the
// page says they print.
func TestPastedBlocks(t *testing.T) {
	all := blocks(t)
	var toRun []block
	seen := map[string]bool{}
	for _, b := range all {
		seen[b.key()] = true
		switch _, runsHere := runs[b.key()]; {
		case b.isAWS:
		case runsHere:
			toRun = append(toRun, b)
		case coveredElsewhere[b.key()] != "":
		default:
			t.Errorf("%s: a sh block that neither runs here, nor says %q on the line before it, nor is covered elsewhere (add it to runs or coveredElsewhere):\n%s", b.name(), needsAWS, b.text)
		}
	}
	for k := range runs {
		if !seen[k] {
			t.Errorf("runs names a block no page has: %q", k)
		}
	}
	for k := range coveredElsewhere {
		if !seen[k] {
			t.Errorf("coveredElsewhere names a block no page has: %q", k)
		}
	}
	if len(toRun) == 0 {
		t.Fatal("no block to run: the walkthrough is gone?")
	}
	for _, tool := range []string{"bash", "curl", "jq", "openssl", "split"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("REQUIRE_INTEGRATION") == "1" {
				t.Fatalf("the pasted blocks need %s: %v", tool, err)
			}
			t.Skipf("the pasted blocks need %s: %v", tool, err)
		}
	}
	testenv.RequireTools(t, "dynoxide")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := devstack.Start(ctx, devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join(root, "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-docs", Bucket: "uploads-docs",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, b := range toRun {
		t.Run(b.name(), func(t *testing.T) {
			// As pasted, but at the stack's address: the block sets API to
			// make dev's, which this stack is not.
			text := strings.ReplaceAll(b.text, "http://127.0.0.1:3000", st.APIURL)
			cmd := exec.CommandContext(ctx, "bash", "-c", text)
			cmd.Dir = t.TempDir()
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("the block failed: %v\n%s", err, out.String())
			}
			rest := out.String()
			for _, want := range runs[b.key()] {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("the block's output lacks %q (after what came before it):\n%s", want, out.String())
				}
				rest = rest[i+len(want):]
			}
		})
	}
}
