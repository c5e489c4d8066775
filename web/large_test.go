package web_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const mib = 1 << 20

// bigFile writes size pseudo-random bytes to dir/name (never committed: a
// test's temporary folder) and returns its path and SHA-256.
func bigFile(t *testing.T, dir, name string, size int64) (path, sum string) {
	t.Helper()
	path = filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := mrand.NewChaCha8([32]byte{byte(size), byte(size >> 8), byte(size >> 16), byte(size >> 24)})
	h := sha256.New()
	w := bufio.NewWriterSize(f, mib)
	buf := make([]byte, mib)
	for left := size; left > 0; left -= int64(len(buf)) {
		if left < int64(len(buf)) {
			buf = buf[:left]
		}
		_, _ = rng.Read(buf)
		h.Write(buf)
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path, hex.EncodeToString(h.Sum(nil))
}

// multipartUploads lists the bucket's unfinished multipart uploads.
func (h *harness) multipartUploads(t *testing.T) []string {
	t.Helper()
	out, err := h.s3.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(h.st.Bucket)})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}

// partPuts is what the proxy saw of the part PUTs to S3, by part number.
func partPuts(log []proxied, s3Host string) map[int][]proxied {
	out := map[int][]proxied{}
	for _, e := range log {
		if e.Method == http.MethodPut && e.Host == s3Host && e.PartNumber > 0 {
			out[e.PartNumber] = append(out[e.PartNumber], e)
		}
	}
	return out
}

func screenshotsExist(t *testing.T, paths []string, n int) {
	t.Helper()
	if len(paths) != n {
		t.Errorf("%d screenshots, want %d: %v", len(paths), n, paths)
	}
	for _, p := range paths {
		png, err := os.ReadFile(p)
		if err != nil || len(png) < 10_000 || !strings.HasPrefix(string(png), "\x89PNG") {
			t.Errorf("screenshot %s: %d bytes, %v", p, len(png), err)
		}
		abs, _ := filepath.Abs(p)
		t.Logf("screenshot: %s", abs)
	}
}

// createBody is what the browser's create requests say.
type createBody struct {
	Size     int64   `json:"size"`
	PartSize int64   `json:"partSize"`
	SHA256   *string `json:"sha256"`
}

// createBodies are the create requests the browser sent.
func createBodies(t *testing.T, res result) []createBody {
	t.Helper()
	var out []createBody
	for _, p := range res.Posts {
		var b createBody
		if err := json.Unmarshal([]byte(p.Body), &b); err != nil {
			t.Errorf("create body %q: %v", p.Body, err)
		}
		out = append(out, b)
	}
	return out
}

// partSums is the SHA-256 (hex) of each partSize part of the file at path.
func partSums(t *testing.T, path string, partSize int64) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sums []string
	for {
		h := sha256.New()
		n, err := io.CopyN(h, f, partSize)
		if n > 0 {
			sums = append(sums, hex.EncodeToString(h.Sum(nil)))
		}
		if err == io.EOF {
			return sums
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// declared is a part named in a sign or complete body.
type declared struct {
	PartNumber int    `json:"partNumber"`
	SHA256     string `json:"sha256"`
}

// apiBodies are the bodies of the POSTs to the API whose path ends with
// suffix ("/parts": signing, "/complete"), in the order they started, with
// their place in the log.
func apiBodies(t *testing.T, log []proxied, suffix string) (bodies []struct {
	Entry int
	Parts []declared
}) {
	t.Helper()
	for i, e := range log {
		if e.Method != http.MethodPost || !strings.HasPrefix(e.Path, "/uploads/") || !strings.HasSuffix(e.Path, suffix) {
			continue
		}
		var b struct{ Parts []declared }
		if err := json.Unmarshal([]byte(e.Body), &b); err != nil {
			t.Errorf("POST %s body %q: %v", e.Path, e.Body, err)
		}
		bodies = append(bodies, struct {
			Entry int
			Parts []declared
		}{i, b.Parts})
	}
	return bodies
}

// checkDeclared checks that the browser's (last) complete declared every
// part with its SHA-256, and that its creates gave no whole-file SHA-256.
func checkDeclared(t *testing.T, res result, log []proxied, sums []string) {
	t.Helper()
	for _, c := range createBodies(t, res) {
		if c.SHA256 != nil {
			t.Errorf("a multipart create gave sha256 %q: the browser read the whole file first", *c.SHA256)
		}
	}
	completes := apiBodies(t, log, "/complete")
	if len(completes) == 0 {
		t.Fatal("the proxy saw no complete")
	}
	got := completes[len(completes)-1].Parts
	if len(got) != len(sums) {
		t.Fatalf("complete declared %d parts, want %d", len(got), len(sums))
	}
	for i, p := range got {
		if p.PartNumber != i+1 || p.SHA256 != sums[i] {
			t.Errorf("complete declared part %d as %+v, want %d %s", i+1, p, i+1, sums[i])
		}
	}
}

// fillMultipartPlaces creates multipart uploads (as the page's tenant: no
// token) until the API refuses one with 429 too_many_uploads, and returns
// the ones it created. A cleanup aborts them.
func (h *harness) fillMultipartPlaces(t *testing.T) []string {
	t.Helper()
	sum := sha256.Sum256([]byte("filler"))
	body := `{"filename":"filler.bin","contentType":"application/octet-stream","size":11534336,"sha256":"` + hex.EncodeToString(sum[:]) + `","partSize":5242880}`
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			req, _ := http.NewRequest(http.MethodDelete, h.st.APIURL+"/uploads/"+id, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	for range 1000 {
		req, _ := http.NewRequest(http.MethodPost, h.st.APIURL+"/uploads", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "browser-filler-"+rand.Text())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct{ UploadID, Error string }
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated && answer.UploadID != "":
			ids = append(ids, answer.UploadID)
		case resp.StatusCode == http.StatusTooManyRequests && answer.Error == "too_many_uploads":
			if len(ids) == 0 {
				t.Fatal("the first filler was refused: uploads of an earlier test hold every place")
			}
			t.Logf("%d multipart uploads created; the next one was refused with 429 too_many_uploads", len(ids))
			return ids
		default:
			t.Fatalf("create of a filler: %d %+v", resp.StatusCode, answer)
		}
	}
	t.Fatalf("%d multipart uploads created, none refused", len(ids))
	return nil
}

// Files over 64 MiB in parts, hashed in a worker, resumed after a reload,
// discarded, through network drops; a 40 MiB single PUT through a 4 s cut.
func TestBrowserLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dir := t.TempDir()
	s3Host := hostOf(t, h.st.S3URL)
	limit := 5 * time.Minute
	noneLeft := func(t *testing.T) {
		t.Helper()
		if left := h.multipartUploads(t); len(left) != 0 {
			t.Errorf("multipart uploads left in the bucket: %v", left)
		}
	}

	path72, sum72 := bigFile(t, dir, "video-72m.mp4", 72*mib)
	fileEnv := func(path, sum string) []string {
		typ := "application/octet-stream"
		if strings.HasSuffix(path, ".mp4") {
			typ = "video/mp4" // as the browser names it
		}
		return []string{"FILE_PATH=" + path, "FILE_SHA256=" + sum, "FILE_TYPE=" + typ}
	}

	// The bug of issue #13: a file over 64 MiB picked for the first time
	// failed at once ("Choose … again").
	for _, lose := range []bool{false, true} {
		name := "first-pick"
		if lose {
			name = "lost-part-answer"
		}
		t.Run(name, func(t *testing.T) {
			p := newNetProxy(t)
			if lose {
				lost := false
				p.loseAnswer = func(r *http.Request) bool {
					if !lost && isPart(r, 2) {
						lost = true
						return true
					}
					return false
				}
			}
			before := h.objects(t)
			res := h.runWith(t, "big", "", limit, append(fileEnv(path72, sum72), "PROXY_URL="+p.URL(), "SHOTS="+name)...)
			rows := h.checkFiles(t, res)
			r := rows["video-72m.mp4"]
			if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
				t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
			}
			for _, c := range createBodies(t, res) {
				if c.Size != 72*mib || c.PartSize != 8*mib {
					t.Errorf("create %+v, want size 72 MiB in parts of 8 MiB", c)
				}
			}
			if hasStatus(res, "", regexp.MustCompile(`again`)) {
				t.Errorf("the page asked for the file again: %+v", res.StatusLog)
			}
			parts := partPuts(p.seen(), s3Host)
			for n := 1; n <= 9; n++ {
				puts := parts[n]
				want := 1
				if lose && n == 2 {
					want = 2
				}
				if len(puts) != want || puts[len(puts)-1].Status != 200 || puts[len(puts)-1].Bytes != 8*mib {
					t.Errorf("part %d: %+v, want %d PUT(s), the last one 200 with 8 MiB", n, puts, want)
				}
			}
			if lose {
				if first := parts[2][0]; !first.Lost || first.Status != 200 {
					t.Errorf("part 2's first PUT: %+v; want stored (200) and its answer lost", first)
				}
				if !hasStatus(res, r.Key, regexp.MustCompile(`^Retrying upload in \d+ s \(no answer from the server\)$`)) {
					t.Errorf("the page never said it retried the part: %+v", res.StatusLog)
				}
			} else {
				screenshotsExist(t, res.Screenshots, 2)
				// No whole-file pass: nothing to prepare.
				if hasStatus(res, "", regexp.MustCompile(`^Preparing…`)) {
					t.Errorf("the status line said Preparing…: %+v", res.StatusLog)
				}
			}
			checkDeclared(t, res, p.seen(), partSums(t, path72, 8*mib))
			// The measurement hook: each mark once, in order, in time.
			var marks []string
			for i, m := range res.TimingMarks {
				marks = append(marks, m.Mark)
				if i > 0 && (m.At < res.TimingMarks[i-1].At || m.Key != r.Key) {
					t.Errorf("timing mark %+v after %+v", m, res.TimingMarks[i-1])
				}
			}
			if want := []string{"picked", "created", "first-part-stored", "completed"}; !slices.Equal(marks, want) {
				t.Errorf("onceupload:timing marks %v, want %v", marks, want)
			}
			noneLeft(t)
		})
	}

	t.Run("reload-resume", func(t *testing.T) {
		const size = 200 * mib
		path, sum := bigFile(t, dir, "big-200m.bin", size)
		// The same size, one byte changed in part 1 (which S3 holds at the reload).
		other := filepath.Join(dir, "other-200m.bin")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[1000] ^= 0xff
		if err := os.WriteFile(other, data, 0o600); err != nil {
			t.Fatal(err)
		}
		data = nil
		p := newNetProxy(t)
		before := h.objects(t)
		res := h.runWith(t, "resume", "", limit, append(fileEnv(path, sum), "PROXY_URL="+p.URL(), "THROTTLE="+strconv.Itoa(40*mib), "WRONG_FILE_PATH="+other)...)
		rows := h.checkFiles(t, res)
		r := rows["big-200m.bin"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		if res.PartCount != 25 || res.PartsBefore < 12 || res.PartsBefore >= 25 {
			t.Errorf("reloaded with %d of %d parts stored; want about half of 25", res.PartsBefore, res.PartCount)
		}
		if b := res.Before; b.Phase != "uploading" || b.Key != r.Key || b.UploadID != r.UploadID {
			t.Errorf("before the reload: %+v; after: %+v", b, r)
		}
		if len(res.StoredBefore) != 1 || res.StoredBefore[0].Key != r.Key || res.StoredBefore[0].HasFile {
			t.Errorf("IndexedDB before the reload: %+v; want the key, without the file", res.StoredBefore)
		}
		if l := res.Listed; l.Key != r.Key || !strings.HasPrefix(l.Status, "Interrupted") || !slices.Contains(l.Buttons, "Resume upload of big-200m.bin (pick the same file)") ||
			!regexp.MustCompile(`^Interrupted with (1[2-9]|2[0-4]) of 25 parts stored, [\d.]+ MiB\. Resume, then pick the same file again: only the missing parts are sent\.$`).MatchString(l.Status) || l.Progress < 40 || l.Progress >= 100 {
			t.Errorf("after the reload the page lists %+v", l)
		}
		if r.Replay != "true" {
			t.Errorf("the resumed create was not a replay (replay %q)", r.Replay)
		}
		// The other file: its parts held by S3 hashed from it, one differs: refused, nothing sent, Resume offered again.
		if w := res.Wrong; w.Phase != "failed" || !strings.HasPrefix(w.Status, `Failed: This is not the same "big-200m.bin": its part 1 differs`) ||
			!slices.Contains(w.Buttons, "Resume upload of big-200m.bin (pick the same file)") {
			t.Errorf("after the other file was picked the row shows %+v", w)
		}
		checked, uploading := -1, -1
		for i, s := range res.StatusLog {
			if s.Key == r.Key && s.Text == "Checking the parts stored against this file…" {
				checked = i
			}
			if s.Key == r.Key && s.Text == "Uploading…" && checked >= 0 && i > checked {
				uploading = i
			}
		}
		if checked < 0 || uploading < 0 {
			t.Errorf("the page never said it checked the parts stored, then Uploading…: %+v", res.StatusLog)
		}
		// The parts whose URLs the reloaded page asked for, so far in the
		// log. A part's URL is kept nowhere but in the page that asked for
		// it, so a PUT of a part it has not asked for is the page before
		// the reload: one of its workers' PUTs still on its way (a worker
		// sends the part it read, and outlives its page by a moment).
		signedAfter := map[int]bool{}
		var after, total int64
		for _, e := range p.seen() {
			if e.Mark > 0 && e.Method == http.MethodPost && strings.HasSuffix(e.Path, "/parts") {
				var b struct{ Parts []struct{ PartNumber int } }
				_ = json.Unmarshal([]byte(e.Body), &b)
				for _, q := range b.Parts {
					signedAfter[q.PartNumber] = true
				}
			}
			if e.Method == http.MethodPut && e.Host == s3Host {
				total += e.Bytes
				if e.Mark > 0 {
					after += e.Bytes
				}
				if e.Mark == 2 && signedAfter[e.PartNumber] {
					t.Errorf("a PUT while the other file was picked: %+v", e)
				} else if e.Mark == 2 {
					t.Logf("the page before the reload: part %d's PUT ended after it (%d bytes, status %d)", e.PartNumber, e.Bytes, e.Status)
				}
			}
			if e.Mark == 2 && e.Method == http.MethodPost && strings.HasSuffix(e.Path, "/parts") {
				t.Errorf("a sign request while the other file was picked: %+v", e)
			}
		}
		t.Logf("bytes sent: %d in all; %d after the reload = %.1f %% of the file", total, after, 100*float64(after)/size)
		if after >= size*6/10 || after == 0 {
			t.Errorf("after the reload the browser sent %d bytes, want under 60 %% of %d", after, size)
		}
		screenshotsExist(t, res.Screenshots, 2)
		noneLeft(t)
	})

	t.Run("discard", func(t *testing.T) {
		p := newNetProxy(t)
		before := h.objects(t)
		res := h.runWith(t, "discard", "", limit, append(fileEnv(path72, sum72), "PROXY_URL="+p.URL())...)
		id := res.Paused.UploadID
		if id == "" || !regexp.MustCompile(`^Paused with [2-9] of 9 parts stored, [\d.]+ MiB\. Resume continues with the same key\.$`).MatchString(res.Paused.Status) ||
			res.Paused.Progress == 0 || !slices.Contains(res.Paused.Buttons, "Discard upload of video-72m.mp4") {
			t.Errorf("after Cancel the row shows %+v", res.Paused)
		}
		if len(res.Rows) != 0 || len(res.Stored) != 0 {
			t.Errorf("after Discard: rows %+v, IndexedDB %+v", res.Rows, res.Stored)
		}
		if added := h.newObjects(t, before); len(added) != 0 {
			t.Errorf("new objects %v", added)
		}
		deleted := false
		for _, e := range p.seen() {
			deleted = deleted || e.Method == http.MethodDelete && e.Path == "/uploads/"+id && e.Status == 200
		}
		if !deleted {
			t.Errorf("the proxy saw no DELETE /uploads/%s answered 200", id)
		}
		resp, err := http.Get(h.st.APIURL + "/uploads/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Status string }
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if st.Status != "aborted" {
			t.Errorf("GET /uploads/%s: %q, want aborted", id, st.Status)
		}
		screenshotsExist(t, res.Screenshots, 1)
		noneLeft(t)
	})

	// The tenant holds as many unfinished multipart uploads as the stack
	// allows: the page's create is refused with 429 too_many_uploads once,
	// not retried; the row says to finish or discard uploads and offers Try
	// again, which completes it once places are free.
	t.Run("too-many-uploads", func(t *testing.T) {
		fillers := h.fillMultipartPlaces(t)
		p := newProxy(t, h.st.APIURL, false)
		before := h.objects(t)
		res := h.runWith(t, "too-many", p.URL, limit, append(fileEnv(path72, sum72), "FREE_UPLOAD_IDS="+strings.Join(fillers, ","))...)
		rows := h.checkFiles(t, res)
		r := rows["video-72m.mp4"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		f := res.Refused
		if f.Key != r.Key || f.Phase != "failed" || !strings.HasPrefix(f.Status, "Not started: you have too many unfinished uploads. Finish or discard some of them") ||
			!slices.Equal(f.Buttons, []string{"Try uploading video-72m.mp4 again", "Remove video-72m.mp4"}) {
			t.Errorf("the refused row: %+v", f)
		}
		if len(res.StoredRefused) != 1 || res.StoredRefused[0].Key != r.Key || res.StoredRefused[0].Phase != "failed" {
			t.Errorf("IndexedDB after the refusal: %+v", res.StoredRefused)
		}
		creates := proxyCreates(t, p, r.Key)
		if res.CreatesWhenRefused != 1 || len(creates) != 2 || creates[0].Status != http.StatusTooManyRequests || creates[1].Status != http.StatusCreated || creates[1].Replay {
			t.Errorf("creates: %d when refused; the proxy saw %+v; want one 429, then (Try again) one first-time 201", res.CreatesWhenRefused, creates)
		}
		if hasStatus(res, r.Key, regexp.MustCompile(`^Retrying`)) {
			t.Errorf("the page retried: %+v", res.StatusLog)
		}
		screenshotsExist(t, res.Screenshots, 1)
		noneLeft(t)
	})

	t.Run("offline", func(t *testing.T) {
		before := h.objects(t)
		res := h.runWith(t, "offline", "", limit, fileEnv(path72, sum72)...)
		rows := h.checkFiles(t, res)
		r := rows["video-72m.mp4"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		if res.During.Status != "Waiting for the network…" {
			t.Errorf("3 s offline, the row said %q", res.During.Status)
		}
		screenshotsExist(t, res.Screenshots, 1)
		noneLeft(t)
	})

	// The drill of issue #13: every connection cut at 30 % of a 40 MiB PUT,
	// and refused for 4 s.
	t.Run("network-drop", func(t *testing.T) {
		const size = 40 * mib
		path, sum := bigFile(t, dir, "drill-40m.bin", size)
		p := newNetProxy(t)
		p.cutAt = func(r *http.Request) int64 {
			if r.Method == http.MethodPut && r.URL.Host == s3Host && r.ContentLength == size {
				return size * 3 / 10
			}
			return -1
		}
		before := h.objects(t)
		res := h.runWith(t, "drop", "", limit, append(fileEnv(path, sum), "PROXY_URL="+p.URL())...)
		rows := h.checkFiles(t, res)
		r := rows["drill-40m.bin"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		cuts := p.cutsMade()
		if len(cuts) != 1 || cuts[0].Closed == 0 {
			t.Fatalf("cuts %+v, want one that closed connections", cuts)
		}
		var puts []proxied
		for _, e := range p.seen() {
			if e.Method == http.MethodPut && e.Host == s3Host {
				puts = append(puts, e)
			}
		}
		if len(puts) < 2 || puts[0].Bytes > size*3/10 || puts[0].Bytes < size/4 || puts[len(puts)-1].Status != 200 || puts[len(puts)-1].Bytes != size {
			t.Errorf("PUTs through the proxy: %+v; want one cut at 30 %%, and a whole one", puts)
		}
		if !hasStatus(res, r.Key, regexp.MustCompile(`^Retrying upload in \d+ s`)) {
			t.Errorf("the page never said it retried: %+v", res.StatusLog)
		}
		if hasStatus(res, r.Key, regexp.MustCompile(`^Failed`)) {
			t.Errorf("the page said it failed: %+v", res.StatusLog)
		}
	})

	// Each part read once, by the worker that hashes it and then sends it
	// (issue 45): the page's thread gets messages from its workers, never
	// a part's bytes; at most partConcurrency (4) parts held at once; no
	// part PUT made by the page. As a user's browser (no navigator.webdriver)
	// the workers send the bytes they read as they are; under automation
	// (this driver's), Blobs of them. An older hash-worker.js served beside
	// this package (its messages of protocol 1) hashes only, and the page
	// sends the parts, as before.
	for _, name := range []string{"worker-sends", "worker-sends-automation", "old-worker"} {
		old := name == "old-worker"
		t.Run(name, func(t *testing.T) {
			p := newNetProxy(t)
			env := append(fileEnv(path72, sum72), "PROXY_URL="+p.URL())
			if old {
				env = append(env, "OLD_WORKER=1")
			}
			if name == "worker-sends" {
				env = append(env, "AS_USER=1")
			}
			before := h.objects(t)
			res := h.runWith(t, "worker-sends", "", limit, env...)
			rows := h.checkFiles(t, res)
			r := rows["video-72m.mp4"]
			if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
				t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
			}
			parts := partPuts(p.seen(), s3Host)
			for n := 1; n <= 9; n++ {
				if puts := parts[n]; len(puts) != 1 || puts[0].Status != 200 || puts[0].Bytes != 8*mib {
					t.Errorf("part %d: %+v, want one PUT, 200 with 8 MiB", n, puts)
				}
			}
			checkDeclared(t, res, p.seen(), partSums(t, path72, 8*mib))
			w := res.WorkerTraffic
			t.Logf("%s: %+v", name, w)
			if w.Messages == 0 || w.WithBytes != 0 || w.Bytes != 0 {
				t.Errorf("messages from the workers to the page: %+v; want some, none with bytes", w)
			}
			if old {
				if w.Holds != 0 || w.PagePuts != 9 {
					t.Errorf("with an older worker: %+v; want no part held, the page sending the 9 parts", w)
				}
				return
			}
			if w.Holds != 9 || w.MaxHeld < 1 || w.MaxHeld > 4 || w.PagePuts != 0 {
				t.Errorf("parts held and sent by the workers: %+v; want 9 holds, at most 4 at once, no part PUT from the page", w)
			}
			if want := map[string]int{"worker-sends": 0, "worker-sends-automation": 9}[name]; w.AsBlob != want {
				t.Errorf("%d hold jobs asked for Blobs, want %d", w.AsBlob, want)
			}
		})
	}

	// 1 GiB in 128 parts: hashed in a pool of workers as they are sent, so
	// the first part is stored before the last one is hashed (it can be
	// signed only once hashed, and the proxy sees the order). The main
	// thread's longest tasks are logged, not judged: they depend on the
	// machine's load.
	t.Run("upload-1g", func(t *testing.T) {
		const size = 1024 * mib
		path, sum := bigFile(t, dir, "disk-1g.bin", size)
		p := newNetProxy(t)
		before := h.objects(t)
		res := h.runWith(t, "upload-1g", "", limit, append(fileEnv(path, sum), "PROXY_URL="+p.URL())...)
		m := res.MainThread
		t.Logf("main thread while uploading 1 GiB: %d tasks, the longest %.1f ms (top %v), %d over 50 ms; long tasks observed: %d", m.Tasks, m.LongestMs, m.Top, m.Over50, len(res.LongTasks))
		rows := h.checkFiles(t, res)
		r := rows["disk-1g.bin"]
		if added := h.newObjects(t, before); len(added) != 1 || added[0] != r.StorageKey {
			t.Errorf("new objects %v, want exactly [%s]", added, r.StorageKey)
		}
		log := p.seen()
		checkDeclared(t, res, log, partSums(t, path, 8*mib))
		const last = size / (8 * mib)
		var put1 *proxied
		for i, e := range log {
			if e.Method == http.MethodPut && e.Host == s3Host && e.PartNumber == 1 && e.Status == 200 {
				put1 = &log[i]
				break
			}
		}
		if put1 == nil {
			t.Fatal("the proxy saw no part 1 stored")
		}
		signedLast := -1
		signs := apiBodies(t, log, "/parts")
		for _, b := range signs {
			for _, d := range b.Parts {
				if d.PartNumber == last && signedLast < 0 {
					signedLast = b.Entry
				}
			}
		}
		if signedLast < 0 {
			t.Fatalf("no sign request named part %d", last)
		}
		if s := log[signedLast]; !put1.End.Before(s.Start) {
			t.Errorf("part 1 was stored at %s, after part %d was hashed and signed (%s): the file was read before sending", put1.End.Format(time.StampMilli), last, s.Start.Format(time.StampMilli))
		}
		var sizes []int
		for _, b := range signs {
			sizes = append(sizes, len(b.Parts))
		}
		t.Logf("part 1 stored %s before part %d was signed; %d sign requests, of %v parts", log[signedLast].Start.Sub(put1.End).Round(time.Millisecond), last, len(signs), sizes)
		if n := len(res.Workers); n < 1 || n > 4 {
			t.Errorf("workers started by the page: %v; want a pool of 1 to 4", res.Workers)
		}
		for _, w := range res.Workers {
			if !strings.HasSuffix(w, "/hash-worker.js") {
				t.Errorf("a worker %s; want only hashing workers", w)
			}
		}
		noneLeft(t)
	})
}
