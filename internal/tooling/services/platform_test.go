package services_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// platformScript is scripts/platform.sh, which install-tools.sh sources.
const platformScript = "../../../scripts/platform.sh"

// runPlatform runs a function of scripts/platform.sh with args in bash and
// returns its output and whether it succeeded.
func runPlatform(t *testing.T, env []string, stdin string, fn string, args ...string) (string, bool) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command(bash, append([]string{"-c", `. "$0" && "$@"`, platformScript, fn}, args...)...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), err == nil
}

// The dynoxide package install-tools.sh installs, for each machine as uname
// describes it: Linux and macOS on x64 and arm64 have one; anything else
// gets none, and make dev uses dynalite.
func TestDynoxidePackage(t *testing.T) {
	for _, c := range []struct{ os, arch, want string }{
		{"Linux", "x86_64", "@dynoxide/linux-x64"},
		{"Linux", "aarch64", "@dynoxide/linux-arm64"},
		{"Darwin", "x86_64", "@dynoxide/darwin-x64"},
		{"Darwin", "arm64", "@dynoxide/darwin-arm64"},
		{"Linux", "arm64", "@dynoxide/linux-arm64"},
		{"FreeBSD", "amd64", ""},
		{"Linux", "riscv64", ""},
		{"Linux", "armv7l", ""},
		{"Darwin", "ppc", ""},
		{"MINGW64_NT-10.0", "x86_64", ""},
		{"", "", ""},
	} {
		got, ok := runPlatform(t, nil, "", "dynoxide_package", c.os, c.arch)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("dynoxide_package %q %q = %q (ok %v), want %q", c.os, c.arch, got, ok, c.want)
		}
	}
}

// sha256_hex gives the same digest with sha256sum (Linux) and with shasum
// (macOS, which has no sha256sum).
func TestSHA256Hex(t *testing.T) {
	in := "tools/package.json and tools/package-lock.json\n"
	sum := sha256.Sum256([]byte(in))
	want := hex.EncodeToString(sum[:])
	if got, ok := runPlatform(t, nil, in, "sha256_hex"); got != want || !ok {
		t.Errorf("sha256_hex = %q (ok %v), want %q", got, ok, want)
	}
	// A PATH with shasum and cut but no sha256sum, as on macOS.
	dir := t.TempDir()
	for _, tool := range []string{"shasum", "cut"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s here", tool)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := runPlatform(t, []string{"PATH=" + dir}, in, "sha256_hex"); got != want || !ok {
		t.Errorf("sha256_hex without sha256sum = %q (ok %v), want %q", got, ok, want)
	}
}
