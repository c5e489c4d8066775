// Package uppy_test tests @onceupload/uppy as an application uses it: both
// packages packed (npm pack), installed from their tarballs into a scratch
// application outside the repository (test/app: its own package.json and
// package-lock.json, with Uppy's Dashboard and Golden Retriever from npm),
// type-checked and bundled there with esbuild, and driven in Debian's
// Chromium (test/e2e.mjs) against the whole local stack.
//
// It needs web/dist/lib (make web, or make web-build: packed as it is) and
// uppy/node_modules (make uppy); without them, node, npm, /usr/bin/chromium
// or the local servers the test is skipped, or fails under
// REQUIRE_INTEGRATION=1.
package uppy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

const chromiumPath = "/usr/bin/chromium"

// e2eResult is what test/e2e.mjs printed.
type e2eResult struct {
	Files []struct {
		Name   string `json:"name"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	} `json:"files"`
	Events []struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		Message string `json:"message"`
		Body    struct {
			IdempotencyKey string `json:"idempotencyKey"`
			UploadID       string `json:"uploadId"`
			StorageKey     string `json:"storageKey"`
			Status         string `json:"status"`
		} `json:"body"`
	} `json:"events"`
	Sent    []sent `json:"sent"`
	Records []struct {
		Key   string `json:"key"`
		Phase string `json:"phase"`
	} `json:"records"`
	Links   map[string]string `json:"links"`
	Seen    map[string]any    `json:"seen"`
	Console []string          `json:"console"`
}

type stack struct {
	node string
	st   *devstack.Stack
	s3   *s3.Client
}

// TestUppyPlugin packs @onceupload/web and @onceupload/uppy, installs the
// tarballs into the scratch application with npm ci (its lockfile pins
// Uppy and everything else), type-checks and bundles it, serves it from the
// local stack, and runs the scenarios of test/e2e.mjs: each file ends with
// exactly one object in the bucket and exactly one upload-success.
func TestUppyPlugin(t *testing.T) {
	testenv.RequireTools(t, "dynoxide", testenv.S3().Binary())
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Need(t, errors.New(chromiumPath+" is missing: apt-get install -y chromium"))
	}
	node, err := exec.LookPath("node")
	testenv.Need(t, err)
	npm, err := exec.LookPath("npm")
	testenv.Need(t, err)
	for _, f := range []string{"node_modules/playwright-core/package.json", "node_modules/typescript/bin/tsc", "../web/node_modules/hash-wasm/package.json"} {
		if _, err := os.Stat(f); err != nil {
			testenv.Need(t, fmt.Errorf("uppy/%s is missing: run `make web uppy` first", f))
		}
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()

	// The tarballs hold the built packages and nothing else of the
	// repository's. web/ is packed as make web built it (--ignore-scripts:
	// its prepack would rebuild web/dist, which web's browser tests serve
	// meanwhile); the plugin's prepack builds it against web/dist/lib. Both
	// under the lock web's package test takes to rebuild web/dist.
	webDir := filepath.Join(here, "..", "web")
	if _, err := os.Stat(filepath.Join(webDir, "dist", "lib", "index.d.ts")); err != nil {
		testenv.Need(t, errors.New("web/dist/lib is not built: run `make web` (or make web-build) first"))
	}
	unlock := testenv.LockFile(t, testenv.WebBuildLock(webDir))
	webTarball, _ := testenv.NpmPack(t, npm, webDir, work, "--ignore-scripts")
	uppyTarball, files := testenv.NpmPack(t, npm, here, work)
	unlock()
	for _, f := range files {
		if f != "package.json" && f != "README.md" && f != "LICENSE" && !strings.HasPrefix(f, "dist/lib/") {
			t.Errorf("the tarball holds %s; want only package.json, README.md, LICENSE and dist/lib/", f)
		}
	}
	for _, want := range []string{"dist/lib/index.js", "dist/lib/index.d.ts", "README.md", "LICENSE"} {
		if !slices.Contains(files, want) {
			t.Errorf("the tarball lacks %s: %v", want, files)
		}
	}

	// The application, outside the repository, with the tarballs where its
	// package.json names them; npm ci installs what its lockfile pins.
	app := filepath.Join(work, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json", "tsconfig.json", "app.ts", "index.html", "build.mjs"} {
		testenv.CopyFile(t, filepath.Join(here, "test", "app", f), filepath.Join(app, f))
	}
	testenv.CopyFile(t, webTarball, filepath.Join(app, "onceupload-web.tgz"))
	testenv.CopyFile(t, uppyTarball, filepath.Join(app, "onceupload-uppy.tgz"))
	testenv.Command(t, app, 5*time.Minute, npm, "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error")
	checkInstalled(t, app)
	// The installed declarations type-check the application, Uppy's included (no skipLibCheck).
	testenv.Command(t, app, 2*time.Minute, node, filepath.Join(here, "node_modules", "typescript", "bin", "tsc"), "-p", filepath.Join(app, "tsconfig.json"))
	testenv.Command(t, app, 2*time.Minute, node, filepath.Join(app, "build.mjs"))

	cfg := devstack.Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-uppy", Bucket: "uploads-uppy", StaticDir: filepath.Join(app, "dist"),
	}
	st, err := devstack.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := &stack{node: node, st: st, s3: testenv.S3Client(st.S3URL, nil)}

	t.Run("reload", func(t *testing.T) {
		before := s.objects(t)
		res := s.run(t, "reload")
		s.checkUploads(t, res, before)
		if len(res.Files) != 2 {
			t.Fatalf("files: %+v", res.Files)
		}
		// The small file succeeded before the reload: after it, nothing of it was sent again.
		onlyPart2After(t, res, "the reload")
		// Golden Retriever kept the small file's blob, not the 11 MiB one's (over its 10 MiB): restored without its bytes.
		if res.Seen["restored"] != 2.0 || res.Seen["ghosts"] != 1.0 {
			t.Errorf("after the reload the Dashboard showed %v files, %v without their bytes; want 2 and 1", res.Seen["restored"], res.Seen["ghosts"])
		}
	})

	t.Run("ghost", func(t *testing.T) {
		before := s.objects(t)
		res := s.run(t, "ghost")
		s.checkUploads(t, res, before)
		var errs []string
		for _, e := range res.Events {
			if e.Type == "upload-error" {
				errs = append(errs, e.Message)
			}
		}
		// The client's own sentence (FILE_NEEDED): the upload's record is there, its bytes are not.
		want := `Choose "big.bin" again to resume: the browser did not keep a copy of it.`
		if len(errs) != 1 || errs[0] != want {
			t.Errorf("upload-error messages %q; want one, %q", errs, want)
		}
		if res.Seen["ghosts"] != 1.0 {
			t.Errorf("after the reload %v files were restored without their bytes, want 1", res.Seen["ghosts"])
		}
		onlyPart2After(t, res, "the file was picked again")
	})

	t.Run("readd", func(t *testing.T) {
		before := s.objects(t)
		res := s.run(t, "readd")
		// One key for both picks (checkUploads), and only the missing part sent after the reload.
		s.checkUploads(t, res, before)
		if res.Seen["restored"] != 0.0 {
			t.Errorf("without Golden Retriever the reloaded page showed %v files, want none", res.Seen["restored"])
		}
		onlyPart2After(t, res, "the file was added again")
	})

	t.Run("pause", func(t *testing.T) {
		before := s.objects(t)
		res := s.run(t, "pause")
		s.checkUploads(t, res, before)
		if res.Seen["sentWhilePaused"] != 0.0 {
			t.Errorf("%v requests were sent while paused, want none", res.Seen["sentWhilePaused"])
		}
		onlyPart2After(t, res, "the Resume")
	})

	t.Run("error", func(t *testing.T) {
		before := s.objects(t)
		res := s.run(t, "error")
		s.checkUploads(t, res, before)
		// describeError's sentence for the client's UploadError (429 too_many_uploads, never retried), not the API's message.
		want := "Too many unfinished uploads: the server allows only so many large uploads in progress at once. Finish or abort some of them, then try this one again."
		var errs []string
		for _, e := range res.Events {
			if e.Type == "upload-error" {
				errs = append(errs, e.Message)
			}
		}
		if len(errs) != 1 || errs[0] != want {
			t.Errorf("upload-error messages %q; want one, %q", errs, want)
		}
		if res.Seen["errorShown"] != 1.0 {
			t.Errorf("the Dashboard showed %v files in error, want 1", res.Seen["errorShown"])
		}
		creates := 0
		for _, p := range res.Sent {
			if p.Method == http.MethodPost {
				creates++
			}
		}
		if creates != 2 {
			t.Errorf("%d creates, want 2 (the one refused, then the Retry's, with the same key)", creates)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := s.objects(t)
		res := s.run(t, "cancel")
		if len(res.Events) != 0 {
			t.Errorf("events %+v; a cancelled file has neither upload-success nor upload-error", res.Events)
		}
		if added := s.newObjects(t, before); len(added) != 0 {
			t.Errorf("new objects %v after a cancel", added)
		}
		if links, _ := res.Seen["linkBefore"].(map[string]any); len(links) != 1 {
			t.Errorf("before the cancel the plugin kept links %v, want one", res.Seen["linkBefore"])
		}
		if len(res.Records) != 0 || len(res.Links) != 0 {
			t.Errorf("after the cancel the client holds %+v and the plugin %v; want nothing", res.Records, res.Links)
		}
		// The client's discard: DELETE /uploads/{id}, and the API says aborted.
		var deleted []string
		for _, p := range res.Sent {
			if p.Method == http.MethodDelete && p.Status == 200 {
				deleted = append(deleted, p.URL[strings.LastIndex(p.URL, "/")+1:])
			}
		}
		if len(deleted) != 1 {
			t.Fatalf("DELETE /uploads/{id} answered 200: %v, want one", deleted)
		}
		if got := s.status(t, deleted[0]); got != "aborted" {
			t.Errorf("GET /uploads/%s says %q, want aborted", deleted[0], got)
		}
	})
}

// sent is a request of the browser's that e2e.mjs recorded: a create (with
// its Idempotency-Key), a DELETE /uploads/{id}, or a PUT to the storage
// (Part: the part's number, 0 for a single PUT), before the scenario's
// interruption (the reload, the Pause, the error) or after it.
type sent struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Key    string `json:"key"`
	Part   int    `json:"part"`
	After  bool   `json:"after"`
	Status int    `json:"status"`
}

// onlyPart2After checks what the scenarios that interrupt the three-part
// file while its part 2 is held want after the interruption (what): no PUT
// but of part 2, and part 2 stored.
func onlyPart2After(t *testing.T, res e2eResult, what string) {
	t.Helper()
	for _, p := range res.Sent {
		if p.After && p.Method == http.MethodPut && p.Part != 2 {
			t.Errorf("after %s the browser sent %s (part %d): only part 2 was missing", what, p.URL, p.Part)
		}
	}
	if !slices.ContainsFunc(res.Sent, func(p sent) bool { return p.After && p.Part == 2 && p.Status == 200 }) {
		t.Errorf("part 2 was not stored after %s", what)
	}
}

// checkInstalled checks the installed plugin's manifest: @uppy/core a peer,
// @onceupload/web an exact dependency (the version packed beside it), no
// install scripts.
func checkInstalled(t *testing.T, app string) {
	t.Helper()
	var plugin, web struct {
		Version          string
		Private          bool
		Scripts          map[string]string
		Dependencies     map[string]string
		PeerDependencies map[string]string
	}
	testenv.ReadJSON(t, filepath.Join(app, "node_modules", "@onceupload", "uppy", "package.json"), &plugin)
	testenv.ReadJSON(t, filepath.Join(app, "node_modules", "@onceupload", "web", "package.json"), &web)
	if plugin.Private {
		t.Error(`the installed package.json says "private": true`)
	}
	if got := plugin.Dependencies["@onceupload/web"]; got != web.Version {
		t.Errorf("@onceupload/uppy depends on @onceupload/web %q; want exactly %q, the version packed with it", got, web.Version)
	}
	if got := plugin.PeerDependencies["@uppy/core"]; !strings.HasPrefix(got, "^6.") {
		t.Errorf("@onceupload/uppy's peer @uppy/core is %q; want ^6.x", got)
	}
	if _, ok := plugin.Dependencies["@uppy/core"]; ok {
		t.Error("@uppy/core is a dependency of the plugin: it must be a peer (one Uppy in the page)")
	}
	for _, s := range []string{"preinstall", "install", "postinstall"} {
		if _, ok := plugin.Scripts[s]; ok {
			t.Errorf("the package has a %s script, which npm runs in every application that installs it", s)
		}
	}
}

// checkUploads checks that every file of the scenario has exactly one
// upload-success, whose upload is completed with the file's bytes, that
// every create for it carried one key, that the bucket gained exactly one
// object per file, and that the client and the plugin keep nothing but the
// completed results' links.
func (s *stack) checkUploads(t *testing.T, res e2eResult, before map[string]int64) {
	t.Helper()
	keys := map[string]bool{}
	for _, p := range res.Sent {
		if p.Method == http.MethodPost {
			keys[p.Key] = true
		}
	}
	if len(keys) != len(res.Files) {
		t.Errorf("the creates carried %d keys %v; want one per file (%d)", len(keys), keys, len(res.Files))
	}
	var stored []string
	for _, f := range res.Files {
		var successes []int
		for i, e := range res.Events {
			if e.Type == "upload-success" && e.Name == f.Name {
				successes = append(successes, i)
			}
		}
		if len(successes) != 1 {
			t.Errorf("%s: %d upload-success events, want exactly 1: %+v", f.Name, len(successes), res.Events)
			continue
		}
		body := res.Events[successes[0]].Body
		if !keys[body.IdempotencyKey] || body.Status != "completed" {
			t.Errorf("%s: upload-success body %+v: not completed, or a key no create carried (%v)", f.Name, body, keys)
		}
		stored = append(stored, body.StorageKey)
		s.checkObject(t, f.Name, body.StorageKey, f.Size, f.SHA256)
		if got := s.status(t, body.UploadID); got != "completed" {
			t.Errorf("%s: GET /uploads/%s says %q, want completed", f.Name, body.UploadID, got)
		}
	}
	slices.Sort(stored)
	if added := s.newObjects(t, before); !slices.Equal(added, stored) {
		t.Errorf("the bucket gained %v; want exactly the successes' objects %v", added, stored)
	}
	if len(res.Records) != 0 {
		t.Errorf("the client still holds %+v after completion", res.Records)
	}
	if len(res.Links) != len(res.Files) {
		t.Errorf("the plugin keeps links %v; want one per file (with its result)", res.Links)
	}
	for k, v := range res.Links {
		if !strings.Contains(v, `"status":"completed"`) {
			t.Errorf("link %s = %s: no completed result", k, v)
		}
	}
}

func (s *stack) run(t *testing.T, scenario string) e2eResult {
	t.Helper()
	stdout := testenv.Script(t, "", 3*time.Minute, []string{"APP_URL=" + s.st.APIURL, "CHROMIUM=" + chromiumPath}, s.node, filepath.Join("test", "e2e.mjs"), scenario)
	var res e2eResult
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("e2e output: %v\n%s", err, stdout)
	}
	for _, line := range res.Console {
		if strings.HasPrefix(line, "pageerror:") {
			t.Errorf("the page threw: %s", line)
		}
	}
	return res
}

func (s *stack) checkObject(t *testing.T, name, key string, size int64, sum string) {
	t.Helper()
	obj, err := s.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(s.st.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Errorf("%s: object %s: %v", name, key, err)
		return
	}
	defer obj.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj.Body)
	if got := hex.EncodeToString(h.Sum(nil)); err != nil || n != size || got != sum {
		t.Errorf("%s: object %s has %d bytes (%v), sha256 %s; want %d, %s", name, key, n, err, got, size, sum)
	}
}

// status is the API's status of an upload (GET /uploads/{id}).
func (s *stack) status(t *testing.T, uploadID string) string {
	t.Helper()
	resp, err := http.Get(s.st.APIURL + "/uploads/" + uploadID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Status
}

func (s *stack) objects(t *testing.T) map[string]int64 {
	t.Helper()
	return testenv.Objects(t, s.s3, s.st.Bucket)
}

func (s *stack) newObjects(t *testing.T, before map[string]int64) []string {
	t.Helper()
	return testenv.NewObjects(t, s.s3, s.st.Bucket, before)
}
