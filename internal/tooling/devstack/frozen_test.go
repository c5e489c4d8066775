package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/onceupload/onceupload/internal/tooling/services"
	"github.com/onceupload/onceupload/internal/tooling/testenv"
)

// With DynamoDB frozen (SIGSTOP), every request still gets the API's own
// answer before the function's timeout: 503 service_unavailable with
// Retry-After, not a hang and not the gateway's bare error. Once DynamoDB
// thaws, the same key works: nothing was left claimed.
func TestFrozenDynamoDBGetsA503(t *testing.T) {
	testenv.RequireTools(t, "dynoxide")
	st, err := Start(context.Background(), Config{
		S3: testenv.StackS3(t), Template: filepath.Join("..", "..", "..", "template.yaml"), DataDir: t.TempDir(),
		Table: "idempotency-frozen", Bucket: "uploads-frozen", FunctionTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var ddb *services.Process
	for _, p := range st.procs.procs {
		if sp, ok := p.(*services.Process); ok && sp.Name == "dynoxide" {
			ddb = sp
		}
	}
	if ddb == nil {
		t.Fatal("no dynoxide process")
	}
	if err := syscall.Kill(ddb.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(ddb.Pid(), syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)

	content := []byte("frozen")
	sum := sha256.Sum256(content)
	single := fmt.Appendf(nil, `{"filename":"f.txt","contentType":"text/plain","size":%d,"sha256":"%x"}`, len(content), sum)
	multi := fmt.Appendf(nil, `{"filename":"f.bin","contentType":"application/octet-stream","size":%d,"sha256":"%x","partSize":%d}`, 6<<20, sum, 5<<20)
	for name, body := range map[string][]byte{"single PUT": single, "multipart": multi} {
		r := call(t, "POST", st.APIURL+"/uploads", "frozen-dynamodb-"+name[:6], body)
		if r.status != 503 || !bytes.Contains(r.body, []byte(`"service_unavailable"`)) || r.header.Get("Retry-After") == "" {
			t.Errorf("%s create with DynamoDB frozen: %d %v %s, want 503 service_unavailable with Retry-After", name, r.status, r.header, r.body)
		}
	}
	if r := call(t, "GET", st.APIURL+"/uploads/"+string(bytes.Repeat([]byte("a"), 64)), "", nil); r.status != 503 {
		t.Errorf("status with DynamoDB frozen: %d %s, want 503", r.status, r.body)
	}
	thaw()
	for name, body := range map[string][]byte{"single PUT": single, "multipart": multi} {
		if r := call(t, "POST", st.APIURL+"/uploads", "frozen-dynamodb-"+name[:6], body); r.status != 201 {
			t.Errorf("%s create after the thaw: %d %s, want 201", name, r.status, r.body)
		}
	}
}
