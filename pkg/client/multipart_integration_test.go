package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/onceupload/onceupload/internal/tooling/devstack"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
	"github.com/onceupload/onceupload/pkg/api"
	"github.com/onceupload/onceupload/pkg/client"
)

// objectBytes is the one object in the stack's bucket, whole.
func objectBytes(t *testing.T, st *devstack.Stack) []byte {
	t.Helper()
	s3c := testenv.S3Client(st.S3URL, nil)
	list, err := s3c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &st.Bucket})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("objects: %v, %v; want exactly one", list, err)
	}
	return objectAt(t, st, *list.Contents[0].Key)
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An upload in parts through the real stack: completed with S3's composite
// checksum, the object is the file, and the key replays without a byte.
func TestMultipartUploadAgainstTheLocalStack(t *testing.T) {
	st := startStack(t, nil)
	c, err := client.New(st.APIURL, fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "big.bin", 17<<20+3) // parts of 5, 5, 5 and 2 MiB + 3 bytes
	var last atomic.Int64
	res, err := c.Upload(context.Background(), path, client.UploadInput{PartSize: api.MinPartSize, Progress: func(sent, total int64) { last.Store(sent) }})
	if err != nil {
		t.Fatal(err)
	}
	u := res.Upload
	if u.Status != api.StatusCompleted || u.Multipart == nil || u.Multipart.PartCount != 4 || !strings.HasSuffix(u.CompositeSHA256, "-4") ||
		res.PartsSent != 4 || last.Load() != 17<<20+3 {
		t.Fatalf("result %+v (%d parts sent), progress %d", u, res.PartsSent, last.Load())
	}
	if !bytes.Equal(objectBytes(t, st), fileBytes(t, path)) {
		t.Fatal("the object is not the file")
	}
	again, err := c.Upload(context.Background(), path, client.UploadInput{Key: res.Key, PartSize: api.MinPartSize})
	if err != nil || !again.Replayed || again.PartsSent != 0 || again.Upload.UploadID != u.UploadID || again.Upload.ETag != u.ETag {
		t.Fatalf("again = %+v, %v", again, err)
	}
	// Another file of the same name and size with this key: the create
	// replays the completed upload, whose compositeSha256 is not the one
	// this file's parts make; refused, nothing sent.
	other := fileBytes(t, path)
	other[2*api.MinPartSize+9] ^= 0xff
	otherPath := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(otherPath, other, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = c.Upload(context.Background(), otherPath, client.UploadInput{Key: res.Key, PartSize: api.MinPartSize})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodePartsMismatch || e.Op != "verify" {
		t.Fatalf("another file with the key: %v; want %s", err, client.CodePartsMismatch)
	}
	if n := objectCount(t, st); n != 1 {
		t.Fatalf("%d objects, want 1", n)
	}
}

// The first Complete reaches the server, which completes the object, but
// its answer is lost: the client's retry gets the same completed body, and
// the bucket holds one object.
func TestLostCompleteAnswer(t *testing.T) {
	st := startStack(t, nil)
	front := loseFirstAnswer(t, st.APIURL, func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/complete")
	})
	c, _ := client.New(front.url, fastRetries)
	path := writeFile(t, "big.bin", 11<<20)
	res, err := c.Upload(context.Background(), path, client.UploadInput{PartSize: api.MinPartSize})
	if err != nil {
		t.Fatal(err)
	}
	completes, lost := front.watched()
	var first api.Upload
	if err := json.Unmarshal(lost, &first); err != nil || first.Status != api.StatusCompleted {
		t.Fatalf("the lost answer %s: %v; want a completed body", lost, err)
	}
	if len(completes) != 2 || !reflect.DeepEqual(first, res.Upload) {
		t.Fatalf("%d completes; lost answer %+v, retry's %+v; want 2 and the same body", len(completes), first, res.Upload)
	}
	if !bytes.Equal(objectBytes(t, st), fileBytes(t, path)) {
		t.Fatal("the object is not the file")
	}
}

// dropProxy is a TCP proxy that, once cutAfter bytes went through it toward
// the server, cuts every connection and refuses new ones for a while, as a
// phone handing over from Wi-Fi to LTE does.
type dropProxy struct {
	addr, target string
	cutAfter     int64
	down         time.Duration

	mu       sync.Mutex
	l        net.Listener
	conns    map[net.Conn]bool
	sent     int64
	cuts     int
	refusing bool
	done     chan struct{}
}

func startDropProxy(t *testing.T, target string, cutAfter int64, down time.Duration) *dropProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{addr: l.Addr().String(), target: target, cutAfter: cutAfter, down: down, l: l, conns: map[net.Conn]bool{}, done: make(chan struct{})}
	go p.accept(l)
	t.Cleanup(func() {
		close(p.done)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.l.Close()
		for c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *dropProxy) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
		go p.pump(up, c)
	}
}

// pump copies the client's bytes to the server, counting them, and cuts
// everything when the count passes cutAfter.
func (p *dropProxy) pump(up, c net.Conn) {
	defer up.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := up.Write(buf[:n]); werr != nil {
				return
			}
			p.mu.Lock()
			p.sent += int64(n)
			cut := p.cuts == 0 && p.sent >= p.cutAfter
			p.mu.Unlock()
			if cut {
				p.cut()
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut closes every connection and the listener, and listens again on the
// same address after p.down.
func (p *dropProxy) cut() {
	p.mu.Lock()
	p.cuts++
	p.refusing = true
	p.l.Close()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	go func() {
		select {
		case <-time.After(p.down):
		case <-p.done:
			return
		}
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return // the test fails: nothing answers
		}
		p.mu.Lock()
		p.l, p.refusing = l, false
		p.mu.Unlock()
		p.accept(l)
	}()
}

// The network drops for 4 seconds in the middle of a PUT: every connection
// is cut and new ones are refused. The client's default policy (no attempt
// cap, a 5-minute budget) rides it out, for one PUT and for parts.
func TestNetworkDropMidPut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		partSize int64
	}{{"single PUT", -1}, {"parts", api.MinPartSize}} {
		t.Run(tc.name, func(t *testing.T) {
			st := startStack(t, nil)
			s3, _ := url.Parse(st.S3URL)
			const size = 40 << 20
			p := startDropProxy(t, s3.Host, size*3/10, 4*time.Second)
			// Presigned URLs name S3's host; the client's dialer goes
			// through the proxy for it, as a route through a flaky network.
			transport := client.NewTransport()
			var d net.Dialer
			transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == s3.Host {
					addr = p.addr
				}
				return d.DialContext(ctx, network, addr)
			}
			c, err := client.New(st.APIURL, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: transport} })
			if err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, "drop.bin", size)
			res, err := c.Upload(context.Background(), path, client.UploadInput{PartSize: tc.partSize})
			if err != nil {
				t.Fatalf("upload across a 4 s drop: %v", err)
			}
			p.mu.Lock()
			cuts := p.cuts
			p.mu.Unlock()
			if cuts != 1 || res.Upload.Status != api.StatusCompleted {
				t.Fatalf("%d cuts, status %s; want one cut, completed", cuts, res.Upload.Status)
			}
			if got := objectBytes(t, st); !bytes.Equal(got, fileBytes(t, path)) {
				t.Fatal("the object is not the file")
			}
			// One PUT declares the whole file's SHA-256 (S3 checks it); an
			// upload in parts declares none, only its parts'.
			if sum := sha256.Sum256(fileBytes(t, path)); (res.Upload.SHA256 == hex.EncodeToString(sum[:])) != (tc.partSize < 0) {
				t.Errorf("completed with sha256 %q; want the file's for one PUT only", res.Upload.SHA256)
			}
		})
	}
}

// Part URLs live one second here; sending at 2 MiB/s, one part at a time,
// the parts after the first find their URLs expired (Versity refuses them,
// sometimes before reading the body, which Go reports as a reset): each is
// signed again and sent, and the upload completes.
func TestExpiredPartURLsAreSignedAgain(t *testing.T) {
	st := startStack(t, map[string]string{"PRESIGN_TTL": "1s"})
	var signs atomic.Int32
	transport := roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/parts") {
			signs.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	c, _ := client.New(st.APIURL, fastRetries, func(o *client.Options) { o.HTTPClient = &http.Client{Transport: transport} })
	path := writeFile(t, "slow.bin", 11<<20) // parts of 5, 5 and 1 MiB
	res, err := c.Upload(context.Background(), path, client.UploadInput{PartSize: api.MinPartSize, Parallel: 1, RateLimit: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.Upload.Status != api.StatusCompleted || signs.Load() < 2 {
		t.Fatalf("status %s after %d sign requests; want completed, with parts signed again", res.Upload.Status, signs.Load())
	}
	if !bytes.Equal(objectBytes(t, st), fileBytes(t, path)) {
		t.Fatal("the object is not the file")
	}
}

// The complete body on the real stack: an upload in parts declares no
// whole-file SHA-256 and completes with every part's, so S3's
// compositeSha256 is the one computed from the file's parts, and there is
// no sha256. A Complete declaring another part SHA-256 than S3 holds is
// refused once with 409 parts_mismatch (final, never retried); declaring
// the right ones completes.
func TestCompleteDeclaresThePartsAgainstTheLocalStack(t *testing.T) {
	st := startStack(t, nil)
	c, err := client.New(st.APIURL, fastRetries)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "big.bin", 11<<20) // parts of 5, 5 and 1 MiB
	data := fileBytes(t, path)
	var digests []byte
	var parts []api.PartToSign
	for off, n := 0, 1; off < len(data); off, n = off+api.MinPartSize, n+1 {
		sum := sha256.Sum256(data[off:min(off+api.MinPartSize, len(data))])
		digests = append(digests, sum[:]...)
		parts = append(parts, api.PartToSign{PartNumber: n, SHA256: hex.EncodeToString(sum[:])})
	}
	composite := sha256.Sum256(digests)
	wantComposite := base64.StdEncoding.EncodeToString(composite[:]) + "-3"
	res, err := c.Upload(context.Background(), path, client.UploadInput{PartSize: api.MinPartSize})
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Upload; u.Status != api.StatusCompleted || u.SHA256 != "" || u.CompositeSHA256 != wantComposite {
		t.Fatalf("completed %+v; want compositeSha256 %s, no sha256", u, wantComposite)
	}

	// By the steps: create without sha256, sign and PUT the parts, then a
	// Complete that declares another part 2.
	created, err := c.Create(context.Background(), client.NewKey(), api.CreateRequest{Filename: "big.bin", ContentType: "application/octet-stream", Size: int64(len(data)), PartSize: api.MinPartSize})
	if err != nil || created.Upload.SHA256 != "" {
		t.Fatalf("create: %+v, %v", created, err)
	}
	id := created.Upload.UploadID
	signed, err := c.SignParts(context.Background(), id, parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range signed {
		off := (sp.PartNumber - 1) * api.MinPartSize
		req, _ := http.NewRequest(sp.Method, sp.URL, bytes.NewReader(data[off:min(off+api.MinPartSize, len(data))]))
		for k, v := range sp.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("PUT part %d: %v %v", sp.PartNumber, resp, err)
		}
		resp.Body.Close()
	}
	wrong := append([]api.PartToSign(nil), parts...)
	other := sha256.Sum256([]byte("other bytes"))
	wrong[1].SHA256 = hex.EncodeToString(other[:])
	_, err = c.Complete(context.Background(), id, &api.CompleteRequest{Parts: wrong})
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 409 || e.Code != client.CodePartsMismatch || e.Attempts != 1 || !strings.Contains(e.Message, "2") {
		t.Fatalf("complete with another part 2: %v; want 409 parts_mismatch naming part 2, after one attempt", err)
	}
	done, err := c.Complete(context.Background(), id, &api.CompleteRequest{Parts: parts})
	if err != nil || done.Status != api.StatusCompleted || done.CompositeSHA256 != wantComposite || done.SHA256 != "" {
		t.Fatalf("complete: %+v, %v", done, err)
	}
	if !bytes.Equal(objectAt(t, st, done.StorageKey), data) {
		t.Fatal("the object is not the file")
	}
}
