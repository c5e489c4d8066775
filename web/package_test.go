package web_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// TestBrowserPackage is the package as an application meets it: packed
// (npm pack, whose prepack builds dist/lib), installed from the tarball
// into a scratch application outside web/, type-checked there against the
// installed declarations, bundled there with esbuild (the demo's build,
// resolving @onceupload/web from the scratch node_modules), and a file
// uploaded through the local stack from Chromium. The client hashes on the
// page's thread when its worker does not start, and the upload works all
// the same: so the test checks that the file was hashed in the worker the
// page started from the URL the application gave (hashWorkerUrl).
func TestBrowserPackage(t *testing.T) {
	node := prerequisites(t)
	npm, err := exec.LookPath("npm")
	need(t, err)
	web, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()

	// The tarball holds the built package and nothing of the repository's.
	// Its prepack rebuilds dist/: not while uppy's test packs it.
	unlock := testenv.LockFile(t, testenv.WebBuildLock(web))
	tarball, files := testenv.NpmPack(t, npm, web, work)
	unlock()
	for _, f := range files {
		if f != "package.json" && f != "README.md" && f != "LICENSE" && !strings.HasPrefix(f, "dist/lib/") {
			t.Errorf("the tarball holds %s; want only package.json, README.md, LICENSE and dist/lib/", f)
		}
	}
	for _, want := range []string{"dist/lib/onceupload.js", "dist/lib/hash-worker.js", "dist/lib/index.d.ts", "README.md", "LICENSE"} {
		if !slices.Contains(files, want) {
			t.Errorf("the tarball lacks %s: %v", want, files)
		}
	}

	// A scratch application: the demo's page and code, nothing else of web/.
	app := filepath.Join(work, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"demo.ts", "index.html"} {
		testenv.CopyFile(t, filepath.Join(web, "demo", f), filepath.Join(app, f))
	}
	writeFile(t, filepath.Join(app, "package.json"), `{"name": "scratch-app", "private": true, "type": "module"}`)
	// The package's one dependency (hash-wasm) comes from npm's cache
	// when npm ci in web/ left it there. An install script of the package
	// runs here, in node_modules/@onceupload/web, as in any application.
	testenv.Command(t, app, 5*time.Minute, npm, "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball)

	var manifest struct {
		Private bool
		Scripts map[string]string
	}
	testenv.ReadJSON(t, filepath.Join(app, "node_modules", "@onceupload", "web", "package.json"), &manifest)
	if manifest.Private {
		t.Error(`the installed package.json says "private": true`)
	}
	for _, s := range []string{"preinstall", "install", "postinstall"} {
		if _, ok := manifest.Scripts[s]; ok {
			t.Errorf("the package has a %s script, which npm runs in every application that installs it", s)
		}
	}

	// The installed declarations type-check the demo (types and exports right).
	writeFile(t, filepath.Join(app, "tsconfig.json"), `{
  "compilerOptions": {
    "target": "ES2022", "module": "ESNext", "moduleResolution": "Bundler",
    "lib": ["ES2022", "DOM", "DOM.Iterable"], "types": [], "strict": true,
    "isolatedModules": true, "verbatimModuleSyntax": true, "noEmit": true
  },
  "include": ["demo.ts"]
}`)
	testenv.Command(t, app, 2*time.Minute, node, filepath.Join(web, "node_modules", "typescript", "bin", "tsc"), "-p", filepath.Join(app, "tsconfig.json"))
	// The ES module entry loads as it is shipped, and exports what an application uses.
	got := strings.TrimSpace(string(testenv.Command(t, app, time.Minute, node, "--input-type=module", "-e",
		`const m = await import("@onceupload/web"); console.log(typeof m.UploadClient, typeof m.describeError)`)))
	if got != "function function" {
		t.Errorf(`import("@onceupload/web") in node: UploadClient and describeError are %q, want functions`, got)
	}

	// The application's build: esbuild (web's) bundles demo.ts from the
	// scratch folder, and the worker is copied from the installed package.
	dist := filepath.Join(app, "dist")
	testenv.Command(t, app, 2*time.Minute, node, filepath.Join(web, "demo", "build.mjs"), "--app", app, "--out", dist)
	bundle, err := os.ReadFile(filepath.Join(dist, "demo.js"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bundle, []byte("./assets/hash-worker.js")) {
		t.Error("the bundle does not name assets/hash-worker.js: the demo's hashWorkerUrl is gone")
	}

	h := newHarnessServing(t, dist)
	res := h.run(t, "upload", "")
	rows := h.checkFiles(t, res)
	r := rows["hello.txt"]
	if r.HashedIn != "worker" {
		t.Errorf("the file was hashed in %q (data-hashed-in), want worker", r.HashedIn)
	}
	want := h.st.APIURL + "/assets/hash-worker.js"
	if !slices.Contains(res.Workers, want) {
		t.Errorf("workers the page started: %v; want %s", res.Workers, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
