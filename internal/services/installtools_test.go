package services_test

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// installScript is scripts/install-tools.sh.
const installScript = "../../scripts/install-tools.sh"

// stubs are commands put first on PATH for install-tools.sh: go and npm
// log their arguments and do nothing, uname answers as the machine under
// test does.
const stubs = `#!/bin/sh
echo "$(basename "$0") $*" >> "$STUB_LOG"
echo "stub: $(basename "$0") $*"
`

// runInstall runs install-tools.sh with args on a stubbed go, npm and uname
// into an empty TOOLS_DIR and returns its stdout and the go commands it ran.
func runInstall(t *testing.T, uname []string, args ...string) (string, [][]string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin, tools := t.TempDir(), t.TempDir()
	for _, name := range []string{"go", "npm"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(stubs), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fakeUname := "#!/bin/sh\ncase $1 in -s) echo " + uname[0] + ";; -m) echo " + uname[1] + ";; esac\n"
	if err := os.WriteFile(filepath.Join(bin, "uname"), []byte(fakeUname), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "stub.log")
	cmd := exec.Command(bash, append([]string{installScript}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TOOLS_DIR="+tools, "STUB_LOG="+log, "INSTALL_CHROMIUM=0", "INSTALL_REDIS=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("install-tools.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var gos [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "go" {
			gos = append(gos, f[1:])
		}
	}
	return string(out), gos
}

// make dev (--dev) builds the Go tools it runs: versitygw, and on Linux
// aws-lambda-rie; tusd, make bench's peer, only a full run builds. The
// run says what it builds, and that it happens once, before the build.
func TestInstallToolsGoBuilds(t *testing.T) {
	for _, c := range []struct {
		os, arch string
		args     []string
		want     []string
		says     string
	}{
		{"Linux", "x86_64", []string{"--dev"}, []string{"aws-lambda-rie", "versitygw"},
			"install-tools: building versitygw and aws-lambda-rie from source"},
		{"Linux", "x86_64", nil, []string{"aws-lambda-rie", "tusd", "versitygw"},
			"install-tools: building versitygw, aws-lambda-rie and tusd from source"},
		{"Darwin", "arm64", []string{"--dev"}, []string{"versitygw"},
			"install-tools: building versitygw from source"},
		{"Darwin", "arm64", nil, []string{"tusd", "versitygw"},
			"install-tools: building versitygw and tusd from source"},
	} {
		name := c.os + " " + strings.Join(append([]string{"install-tools.sh"}, c.args...), " ")
		t.Run(name, func(t *testing.T) {
			out, gos := runInstall(t, []string{c.os, c.arch}, c.args...)
			if len(gos) != 1 || len(gos[0]) < 3 || gos[0][0] != "build" || gos[0][1] != "-o" {
				t.Fatalf("go ran %q, want one go build -o", gos)
			}
			var got []string
			for _, p := range gos[0][3:] {
				got = append(got, path.Base(p))
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("go build built %q, want %q", got, c.want)
			}
			says := strings.Index(out, c.says+", pinned in tools/go.mod (the first time takes a few minutes; later runs reuse Go's build cache)\n")
			build := strings.Index(out, "stub: go build")
			if says < 0 || says > build {
				t.Errorf("the output lacks %q before the go build:\n%s", c.says, out)
			}
		})
	}
}
