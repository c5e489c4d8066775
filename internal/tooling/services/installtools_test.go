package services_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// installScript is scripts/install-tools.sh.
const installScript = "../../../scripts/install-tools.sh"

// stubs are commands put first on PATH for install-tools.sh: go and npm
// log their arguments (and the folder they ran in, last) and do nothing,
// uname answers as the machine under test does.
// With STUB_FAIL_IN=FOLDER, a command run in FOLDER fails.
const stubs = `#!/bin/sh
echo "$(basename "$0") $* in=$(basename "$PWD")" >> "$STUB_LOG"
echo "stub: $(basename "$0") $*"
if [ -n "${STUB_FAIL_IN:-}" ] && [ "$(basename "$PWD")" = "$STUB_FAIL_IN" ]; then echo "stub: failing in $STUB_FAIL_IN" >&2; exit 3; fi
`

// runInstall runs install-tools.sh with args on a stubbed go, npm and uname
// into an empty TOOLS_DIR, with env added to the environment, and returns
// its stdout and the go commands it ran, each ending with in=FOLDER.
func runInstall(t *testing.T, env []string, uname []string, args ...string) (string, [][]string) {
	t.Helper()
	cmd, log := installCommand(t, env, uname, args...)
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

// installCommand is install-tools.sh with args, set up as runInstall runs
// it, and the file its stubs log to.
func installCommand(t *testing.T, env []string, uname []string, args ...string) (*exec.Cmd, string) {
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
		"TOOLS_DIR="+tools, "STUB_LOG="+log, "INSTALL_CHROMIUM=0", "INSTALL_REDIS=0", "DEV_S3=")
	cmd.Env = append(cmd.Env, env...)
	return cmd, log
}

// MinIO builds in the background while the rest installs; a build that
// fails still fails the run, with the build's own output shown.
func TestInstallToolsFailsWithMinIOsBuild(t *testing.T) {
	cmd, _ := installCommand(t, []string{"STUB_FAIL_IN=minio"}, []string{"Linux", "x86_64"})
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("install-tools.sh succeeded with a failing minio build:\n%s", out)
	}
	for _, want := range []string{"stub: failing in minio", "install-tools: the minio build failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// make dev (--dev) builds the Go tools it runs: versitygw, and on Linux
// aws-lambda-rie; tusd, make bench's peer, only a full run builds, and
// minio, the tests' second S3 server, a full run or DEV_S3=minio make dev.
// The run says what it builds, and that it happens once, before the build.
// minio is built in tools/minio, its own module, apart from the others.
func TestInstallToolsGoBuilds(t *testing.T) {
	const minio = "install-tools: building minio from source, pinned in tools/minio/go.mod (the first time takes several minutes; later runs reuse Go's build cache)\n"
	for _, c := range []struct {
		os, arch string
		env      []string
		args     []string
		want     []string
		says     string
		minio    bool
	}{
		{"Linux", "x86_64", nil, []string{"--dev"}, []string{"aws-lambda-rie", "versitygw"},
			"install-tools: building versitygw and aws-lambda-rie from source", false},
		{"Linux", "x86_64", nil, nil, []string{"aws-lambda-rie", "tusd", "versitygw"},
			"install-tools: building versitygw, aws-lambda-rie and tusd from source", true},
		{"Linux", "x86_64", []string{"DEV_S3=minio"}, []string{"--dev"}, []string{"aws-lambda-rie", "versitygw"},
			"install-tools: building versitygw and aws-lambda-rie from source", true},
		{"Linux", "x86_64", []string{"DEV_S3=versity"}, []string{"--dev"}, []string{"aws-lambda-rie", "versitygw"},
			"install-tools: building versitygw and aws-lambda-rie from source", false},
		{"Darwin", "arm64", nil, []string{"--dev"}, []string{"versitygw"},
			"install-tools: building versitygw from source", false},
		{"Darwin", "arm64", nil, nil, []string{"tusd", "versitygw"},
			"install-tools: building versitygw and tusd from source", true},
	} {
		name := c.os + " " + strings.Join(append(slices.Clone(c.env), append([]string{"install-tools.sh"}, c.args...)...), " ")
		t.Run(name, func(t *testing.T) {
			out, gos := runInstall(t, c.env, []string{c.os, c.arch}, c.args...)
			builds := 1
			if c.minio {
				builds = 2
			}
			if len(gos) != builds {
				t.Fatalf("go ran %q, want %d go builds", gos, builds)
			}
			// minio builds in the background, so the stub may log it first.
			in := map[string][]string{}
			for _, g := range gos {
				if len(g) < 4 || g[0] != "build" || g[1] != "-o" {
					t.Fatalf("go ran %q, want go build -o", g)
				}
				in[g[len(g)-1]] = g[3 : len(g)-1]
			}
			tools, ok := in["in=tools"]
			if !ok {
				t.Errorf("no go build ran in tools: %q", gos)
			}
			var got []string
			for _, p := range tools {
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
			if says := strings.Contains(out, minio); says != c.minio {
				t.Errorf("the output says it builds minio: %v, want %v:\n%s", says, c.minio, out)
			}
			if c.minio {
				if got, want := in["in=minio"], []string{"github.com/minio/minio"}; !slices.Equal(got, want) {
					t.Errorf("the go build in tools/minio built %q, want %q", got, want)
				}
			}
		})
	}
}

// A full run installs the IAM evaluator of internal/checks/iamcheck from its own
// lock file into .tools/iamsim, and again only when that lock file (or its
// package.json) changes; make dev (--dev) does not install it.
func TestInstallToolsIAMEvaluator(t *testing.T) {
	tools := t.TempDir()
	ran := func(args ...string) bool {
		t.Helper()
		cmd, log := installCommand(t, []string{"TOOLS_DIR=" + tools}, []string{"Linux", "x86_64"}, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("install-tools.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		raw, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(raw), "npm ci --no-audit --no-fund --loglevel=error in=iamsim\n")
	}
	if ran("--dev") {
		t.Error("install-tools.sh --dev installed the IAM evaluator")
	}
	if !ran() {
		t.Fatal("a full run did not npm ci in .tools/iamsim")
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		want, _ := os.ReadFile(filepath.Join("..", "..", "checks", "iamcheck", "sim", f))
		if got, err := os.ReadFile(filepath.Join(tools, "iamsim", f)); err != nil || !bytes.Equal(got, want) {
			t.Errorf(".tools/iamsim/%s is not internal/checks/iamcheck/sim's: %v", f, err)
		}
	}
	// What npm ci would have installed (the stub installs nothing).
	pkg := filepath.Join(tools, "iamsim", "node_modules", "@cloud-copilot", "iam-simulate")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ran() {
		t.Error("a second run installed the IAM evaluator again, its lock file unchanged")
	}
	if err := os.WriteFile(filepath.Join(tools, "bin", ".iamsim.version"), []byte("an older lock file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !ran() {
		t.Error("a run after the lock file changed did not install the IAM evaluator again")
	}
}

// make lint (--lint) installs the npm tools, redocly among them, and
// nothing else: no Go build, no dynoxide, no IAM evaluator.
func TestInstallToolsLint(t *testing.T) {
	out, gos := runInstall(t, nil, []string{"Linux", "x86_64"}, "--lint")
	if len(gos) != 0 {
		t.Errorf("install-tools.sh --lint ran go: %q", gos)
	}
	if !strings.Contains(out, "install-tools: npm tools (dynalite, redocly, prism)") {
		t.Errorf("install-tools.sh --lint did not install the npm tools:\n%s", out)
	}
	for _, not := range []string{"minio", "dynoxide", "iam-simulate", "from source"} {
		if strings.Contains(out, not) {
			t.Errorf("install-tools.sh --lint mentions %q:\n%s", not, out)
		}
	}
}

// The Go tools are built again only when their pins change: a second run
// with the binaries in place builds nothing, and one after tools/go.mod's
// pins changed (an older stamp) builds them again; so does a run that
// finds a binary missing.
func TestInstallToolsGoBuildsOnlyWhenPinsChange(t *testing.T) {
	tools := t.TempDir()
	env := []string{"TOOLS_DIR=" + tools}
	uname := []string{"Linux", "x86_64"}
	bins := []string{"minio", "versitygw", "aws-lambda-rie", "tusd"}
	install := func(what string) {
		t.Helper()
		// What go build would have made (the stub makes nothing).
		for _, b := range bins {
			if err := os.WriteFile(filepath.Join(tools, "bin", b), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if _, gos := runInstall(t, env, uname); len(gos) != 0 {
			t.Errorf("%s: go ran %q, want no build", what, gos)
		}
	}
	if _, gos := runInstall(t, env, uname); len(gos) != 2 {
		t.Fatalf("the first run: go ran %q, want 2 builds", gos)
	}
	install("a second run")
	if err := os.WriteFile(filepath.Join(tools, "bin", ".go-tools.version"), []byte("older pins\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, gos := runInstall(t, env, uname); len(gos) != 1 || gos[0][len(gos[0])-1] != "in=tools" {
		t.Errorf("after tools/go.mod's pins changed: go ran %q, want the one build in tools", gos)
	}
	install("a run after that")
	if err := os.Remove(filepath.Join(tools, "bin", "minio")); err != nil {
		t.Fatal(err)
	}
	if _, gos := runInstall(t, env, uname); len(gos) != 1 || gos[0][len(gos[0])-1] != "in=minio" {
		t.Errorf("with minio missing: go ran %q, want the one build in tools/minio", gos)
	}
}
