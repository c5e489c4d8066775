// Package services starts and stops the local servers the project runs
// against instead of AWS: dynoxide (DynamoDB), Versity Gateway and MinIO (S3),
// dynalite (a DynamoDB that ignores ALL_OLD, and the local stack's DynamoDB
// where no dynoxide build is published: [StartDynamoDB]), moto (SQS), the
// Lambda Runtime Interface Emulator, Prism (an OpenAPI validating
// proxy) and redis-server (the Redis store's tests). It is the one
// place that starts servers; the dev stack and package testenv use it. The binaries are
// installed by scripts/install-tools.sh into the git-ignored .tools folder;
// moto_server, a Python program, may instead be on PATH, and redis-server,
// Debian's, is installed with apt.
//
// Every server binds to 127.0.0.1 and runs in its own process group, so Stop
// ends it and anything it spawned.
package services

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Process is a running server.
type Process struct {
	Name     string
	Endpoint string // http://127.0.0.1:PORT (redis://… for redis-server)
	cmd      *exec.Cmd
	done     chan struct{}
	logFile  *os.File
	// front, if set, is an in-process server in front of the process that
	// Endpoint names (StartDynamoDB's for dynalite).
	front *http.Server
}

// Stop ends the server (SIGTERM, then SIGKILL after 3 s) and waits for it.
func (p *Process) Stop() error {
	if p == nil || p.cmd.Process == nil {
		return nil
	}
	if p.front != nil {
		_ = p.front.Close()
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	if p.logFile != nil {
		p.logFile.Close()
	}
	return nil
}

// ToolsDir is where the pinned binaries live: $TOOLS_DIR, else .tools at the
// module root found by walking up from the working directory.
func ToolsDir() (string, error) {
	if d := os.Getenv("TOOLS_DIR"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".tools"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Binary returns the path of an installed tool, or an error that says how to
// install it.
func Binary(name string) (string, error) {
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not installed at %s: run `make tools` (scripts/install-tools.sh)", name, p)
	}
	return p, nil
}

// BinaryOrPath is [Binary], falling back to name on PATH for a tool that
// scripts/install-tools.sh does not install.
func BinaryOrPath(name string) (string, error) {
	p, err := Binary(name)
	if err == nil {
		return p, nil
	}
	if p, perr := exec.LookPath(name); perr == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w, and there is no %s on PATH", err, name)
}

// FreePort asks the kernel for a free port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Options for starting a server.
type Options struct {
	// Port to bind on 127.0.0.1. Defaults to a free port.
	Port int
	// LogPath receives the server's output. Defaults to discarding it.
	LogPath string
	// DBPath persists dynoxide's data in this file. Defaults to memory.
	DBPath string
}

func (o *Options) port() (int, error) {
	if o.Port != 0 {
		return o.Port, nil
	}
	return FreePort()
}

func start(ctx context.Context, name string, port int, logPath string, bin string, args ...string) (*Process, error) {
	return startEnv(ctx, name, port, logPath, nil, bin, args...)
}

// startEnv starts bin with env (nil: the host's environment) and waits
// until it answers HTTP on port.
func startEnv(ctx context.Context, name string, port int, logPath string, env []string, bin string, args ...string) (*Process, error) {
	return startReady(ctx, name, port, logPath, env, waitHTTP, bin, args...)
}

// NoServersEnv is the environment variable that, set to 1, makes every
// Start function here fail without starting anything. make unit sets it
// beside go test -short, so that a test that would start a server there
// fails and says so instead of quietly starting one: such a test skips
// under testing.Short() (testenv.SkipShort), as testenv's helpers do.
const NoServersEnv = "ONCEUPLOAD_NO_SERVERS"

// startReady starts bin and waits until ready says it is serving.
func startReady(ctx context.Context, name string, port int, logPath string, env []string, ready func(context.Context, *Process) error, bin string, args ...string) (*Process, error) {
	if os.Getenv(NoServersEnv) == "1" {
		return nil, fmt.Errorf("start %s: %s=1 (make unit starts no servers; a test that needs one skips under go test -short: testenv.SkipShort)", name, NoServersEnv)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	p := &Process{Name: name, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		cmd.Stdout, cmd.Stderr, p.logFile = f, f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if err := ready(ctx, p); err != nil {
		p.Stop()
		return nil, fmt.Errorf("start %s on port %d: %w", name, port, err)
	}
	return p, nil
}

// waitHTTP polls until the server answers any HTTP request.
func waitHTTP(ctx context.Context, p *Process) error {
	client := &http.Client{Timeout: time.Second}
	return poll(ctx, p, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+"/", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

// poll calls ready every 2 ms, for up to 20 s, until it succeeds or the
// server exits.
func poll(ctx context.Context, p *Process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if ready(ctx) == nil {
			return nil
		}
		select {
		case <-p.done:
			return errors.New("exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// StartDynoxide starts an in-memory dynoxide.
func StartDynoxide(ctx context.Context, o Options) (*Process, error) {
	bin, err := Binary("dynoxide")
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port)}
	if o.DBPath != "" {
		args = append(args, "--db-path", o.DBPath)
	}
	return start(ctx, "dynoxide", port, o.LogPath, bin, args...)
}

// StartDynalite starts a dynalite, which (unlike DynamoDB) returns no item on
// a failed condition even when ALL_OLD is asked for. It keeps its data in
// memory, or in a LevelDB directory at o.DBPath.
func StartDynalite(ctx context.Context, o Options) (*Process, error) {
	bin, err := Binary("dynalite")
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}
	if o.DBPath != "" {
		args = append(args, "--path", o.DBPath)
	}
	return start(ctx, "dynalite", port, o.LogPath, bin, args...)
}

// StartMoto starts moto's server (moto_server), which serves SQS among
// other AWS APIs, in memory.
func StartMoto(ctx context.Context, o Options) (*Process, error) {
	bin, err := BinaryOrPath("moto_server")
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	return start(ctx, "moto_server", port, o.LogPath, bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
}

// S3Options configure an S3 server (StartVersity, StartMinIO).
type S3Options struct {
	Options
	// DataDir holds the buckets (Versity's posix backend, MinIO's drive).
	// Required.
	DataDir   string
	AccessKey string // Defaults to AccessKey.
	SecretKey string // Defaults to SecretKey.
	// WebhookURL receives s3:ObjectCreated:* notifications. It must already
	// be listening: Versity Gateway exits at start-up otherwise. On MinIO,
	// only from buckets subscribed to MinIOWebhookARN.
	WebhookURL string
	// CORSOrigins are the origins MinIO's server-wide CORS allows (it has
	// no per-bucket CORS). Versity ignores them: its CORS is the bucket's.
	CORSOrigins []string
}

// StartVersity starts Versity Gateway on a posix data directory.
func StartVersity(ctx context.Context, o S3Options) (*Process, error) {
	bin, err := Binary("versitygw")
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	if o.AccessKey == "" {
		o.AccessKey = AccessKey
	}
	if o.SecretKey == "" {
		o.SecretKey = SecretKey
	}
	// Absolute: the gateway resolves relative paths against its data directory.
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	args := []string{"--port", "127.0.0.1:" + strconv.Itoa(port), "--access", o.AccessKey, "--secret", o.SecretKey}
	if o.WebhookURL != "" {
		filter := filepath.Join(filepath.Dir(o.DataDir), "versitygw-event-filter.json")
		if err := os.WriteFile(filter, []byte(`{"s3:ObjectCreated:*": true}`), 0o644); err != nil {
			return nil, fmt.Errorf("start versitygw: %w", err)
		}
		args = append(args, "--event-webhook-url", o.WebhookURL, "--event-filter", filter)
	}
	args = append(args, "posix", o.DataDir)
	return start(ctx, "versitygw", port, o.LogPath, bin, args...)
}

// RIEOptions configure a function run under the Lambda Runtime Interface
// Emulator.
type RIEOptions struct {
	Options
	// Bootstrap is the function's built binary (make build's, or in
	// tests testenv.Bootstraps').
	Bootstrap string
	// Env is the function's environment (KEY=VALUE), on top of a minimal
	// one: the host's environment is not passed through.
	Env []string
}

// InvokePath is where the emulator accepts invocations.
const InvokePath = "/2015-03-31/functions/function/invocations"

// StartRIE runs a bootstrap under the emulator. The emulator serves one
// invocation at a time: callers serialize (or run several).
func StartRIE(ctx context.Context, o RIEOptions) (*Process, error) {
	// The emulator starts the bootstrap only when the first invocation
	// comes: without this, a missing one would fail that, not the start.
	if info, err := os.Stat(o.Bootstrap); err != nil || info.IsDir() {
		return nil, fmt.Errorf("start aws-lambda-rie: no bootstrap at %s", o.Bootstrap)
	}
	bin, err := Binary("aws-lambda-rie")
	if err != nil {
		return nil, err
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	runtimePort, err := FreePort()
	if err != nil {
		return nil, err
	}
	// Both addresses explicitly: the emulator's default is 0.0.0.0:8080.
	p, err := startEnv(ctx, "aws-lambda-rie", port, o.LogPath, append([]string{"PATH=/usr/bin:/bin"}, o.Env...), bin,
		"--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(port),
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(runtimePort),
		o.Bootstrap)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the server's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// PrismOptions configure StartPrism.
type PrismOptions struct {
	Options
	// Spec is the OpenAPI document (a file) and Upstream the API behind
	// the proxy.
	Spec, Upstream string
	// ValidateRequests answers a request the document forbids with Prism's
	// 422 instead of forwarding it.
	ValidateRequests bool
}

// StartPrism starts Stoplight Prism in proxy mode with --errors: a response
// that violates the document is replaced by Prism's 500 problem document,
// and lesser violations are listed in an sl-violations header. Its output
// goes to o.LogPath, which is required: readiness is read from it.
func StartPrism(ctx context.Context, o PrismOptions) (*Process, error) {
	bin, err := Binary("prism")
	if err != nil {
		return nil, err
	}
	if o.LogPath == "" {
		return nil, errors.New("start prism: a log path is required")
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	return startReady(ctx, "prism", port, o.LogPath, nil, waitLog(o.LogPath, "Prism is listening on http://127.0.0.1:"+strconv.Itoa(port)), bin,
		"proxy", o.Spec, o.Upstream, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--errors", "--cors=false", "--validate-request="+strconv.FormatBool(o.ValidateRequests))
}

// waitLog waits until the server's log at path contains line: for a server
// that says when it has bound its port (a successful dial alone could reach
// whoever else took the port).
func waitLog(path, line string) func(context.Context, *Process) error {
	return func(ctx context.Context, p *Process) error {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(line)) {
				return nil
			}
			select {
			case <-p.done:
				b, _ := os.ReadFile(path)
				return fmt.Errorf("exited during start-up:\n%s", b)
			case <-ctx.Done():
				return fmt.Errorf("not ready: %w", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// NodeOptions configure StartNode.
type NodeOptions struct {
	Options
	// Dir holds Script, a Node.js server that listens on $PORT and prints
	// Ready once it does; Env adds to the host's environment.
	Dir, Script, Ready string
	Env                []string
}

// StartNode runs a Node.js server script (the benchmark's Powertools peer).
// Its output goes to o.LogPath, which is required: readiness is read from it.
func StartNode(ctx context.Context, o NodeOptions) (*Process, error) {
	if o.LogPath == "" {
		return nil, errors.New("start node: a log path is required")
	}
	port, err := o.port()
	if err != nil {
		return nil, err
	}
	script, err := filepath.Abs(filepath.Join(o.Dir, o.Script))
	if err != nil {
		return nil, err
	}
	env := append(append(os.Environ(), o.Env...), "PORT="+strconv.Itoa(port))
	return startReady(ctx, o.Script, port, o.LogPath, env, waitLog(o.LogPath, o.Ready), "node", script)
}
