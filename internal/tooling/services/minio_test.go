package services_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// MinIO starts on loopback only (no console), takes the local keys, serves
// S3 as soon as StartMinIO returns, allows only the origins it is given,
// and sends the events of a bucket subscribed to MinIOWebhookARN to the
// webhook.
func TestStartMinIO(t *testing.T) {
	testenv.RequireTools(t, "minio")
	ctx := context.Background()
	var mu sync.Mutex
	var posts []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	p, err := services.StartMinIO(ctx, services.S3Options{
		DataDir: filepath.Join(t.TempDir(), "data"), WebhookURL: hook.URL, CORSOrigins: []string{"http://localhost:5173"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if !strings.HasPrefix(p.Endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %s, want 127.0.0.1", p.Endpoint)
	}
	if runtime.GOOS == "linux" {
		addrs := listening(t, p.Pid())
		if len(addrs) == 0 {
			t.Errorf("minio listens on nothing that /proc shows")
		}
		for _, a := range addrs {
			if !a.IP.IsLoopback() {
				t.Errorf("minio listens on %s, want loopback only", a)
			}
		}
		if len(addrs) > 2 { // its S3 port, on 127.0.0.1 and ::1
			t.Errorf("minio listens on %v, want its S3 port alone (no console)", addrs)
		}
	}

	// Straight away, with the local keys: no "server not initialized".
	s3c := testenv.S3Client(p.Endpoint, nil)
	bucket := "minio-start"
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := s3c.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
		Bucket: &bucket,
		NotificationConfiguration: &s3types.NotificationConfiguration{QueueConfigurations: []s3types.QueueConfiguration{{
			QueueArn: aws.String(services.MinIOWebhookARN), Events: []s3types.Event{"s3:ObjectCreated:*"},
		}}},
	}); err != nil {
		t.Fatalf("subscribe to %s: %v", services.MinIOWebhookARN, err)
	}
	key := "dir/a b.txt"
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("abc")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		mu.Lock()
		n := len(posts)
		mu.Unlock()
		if n > 0 {
			break
		}
		if i == 200 {
			t.Fatal("no event reached the webhook in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(posts[0], `"key":"dir%2Fa+b.txt"`) || !strings.Contains(posts[0], `"eventName":"s3:ObjectCreated:Put"`) {
		t.Errorf("the event: %s", posts[0])
	}

	for origin, allowed := range map[string]bool{"http://localhost:5173": true, "https://elsewhere.example": false} {
		req, _ := http.NewRequest(http.MethodOptions, p.Endpoint+"/"+bucket+"/x", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "PUT")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin") == origin; got != allowed {
			t.Errorf("preflight from %s: allowed %v (%s, %v), want %v", origin, got, resp.Status, resp.Header, allowed)
		}
	}
}

// listening is every TCP address the process pid listens on, read from
// /proc: its sockets' inodes, found in /proc/net/tcp and tcp6.
func listening(t *testing.T, pid int) []*net.TCPAddr {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []*net.TCPAddr
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			out = append(out, procAddr(t, fields[1]))
		}
		f.Close()
	}
	return out
}

// procAddr decodes /proc/net/tcp's HEXIP:HEXPORT, the IP in 32-bit words of
// host order (little-endian here).
func procAddr(t *testing.T, s string) *net.TCPAddr {
	t.Helper()
	ipHex, portHex, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	port, perr := strconv.ParseUint(portHex, 16, 16)
	if err != nil || perr != nil || len(raw)%4 != 0 {
		t.Fatalf("address %q in /proc/net/tcp", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	return &net.TCPAddr{IP: net.IP(raw), Port: int(port)}
}

// DEV_S3, CHAOS_S3 and TEST_S3 name a server; empty is Versity, and a
// name that is neither is refused, saying which are.
func TestParseS3Server(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   services.S3Server
		binary string
	}{
		{"", services.Versity, "versitygw"},
		{"versity", services.Versity, "versitygw"},
		{"minio", services.MinIO, "minio"},
	} {
		got, err := services.ParseS3Server(c.in)
		if err != nil || got != c.want || got.Binary() != c.binary {
			t.Errorf("ParseS3Server(%q) = %q (binary %q), %v; want %q (%q)", c.in, got, got.Binary(), err, c.want, c.binary)
		}
	}
	for _, in := range []string{"MinIO", "s3", " minio"} {
		if got, err := services.ParseS3Server(in); err == nil || !strings.Contains(err.Error(), `"versity" or "minio"`) {
			t.Errorf("ParseS3Server(%q) = %q, %v; want a refusal naming versity and minio", in, got, err)
		}
	}
}
