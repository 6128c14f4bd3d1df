package targets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
)

// PortkeyPackage is the npm package of the Portkey AI gateway the bench
// compares evalflow with: an LLM gateway on Node that relays OpenAI calls
// to a custom host.
const PortkeyPackage = "@portkey-ai/gateway@1.15.2"

// PortkeyDir is where the gateway is installed: the user's cache
// directory, evalflow/bench/portkey.
func PortkeyDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "evalflow", "bench", "portkey")
}

// portkeyScript is the gateway's server below its install directory.
const portkeyScript = "node_modules/@portkey-ai/gateway/build/start-server.js"

// ErrPeerUnavailable is a peer that cannot be installed or started here
// (no node or npm, no registry): the bench says so and goes on.
var ErrPeerUnavailable = errors.New("peer unavailable")

// InstallPortkey installs PortkeyPackage into dir with npm unless it is
// there already, and returns the path of its server script.
func InstallPortkey(ctx context.Context, dir string) (string, error) {
	script := filepath.Join(dir, portkeyScript)
	if _, err := os.Stat(script); err == nil {
		return script, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%w: npm not found: %v", ErrPeerUnavailable, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
	}
	pkg := filepath.Join(dir, "package.json")
	if _, err := os.Stat(pkg); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(pkg, []byte(`{"name":"evalflow-bench-portkey","private":true}`+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", PortkeyPackage)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: npm install %s: %v: %s", ErrPeerUnavailable, PortkeyPackage, err, tail(out, 400))
	}
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("%w: %s installed without %s", ErrPeerUnavailable, PortkeyPackage, portkeyScript)
	}
	return script, nil
}

// Portkey is a running Portkey gateway relaying OpenAI chat calls to the
// mock: a node process of its own, in its own process group.
type Portkey struct {
	// URL is the gateway's base URL, without /v1.
	URL string
	// upstream is the mock's base URL with /v1, the gateway's custom host.
	upstream string

	cmd  *exec.Cmd
	out  *ringBuffer
	done chan struct{}
	err  error // how the process ended, once done is closed
}

// StartPortkey installs the gateway into dir when needed and starts it on
// a free loopback port, relaying to the mock at base (without /v1). It
// returns once the gateway answers. An error wrapping ErrPeerUnavailable
// means node, npm or the package is missing.
func StartPortkey(ctx context.Context, dir, base string) (*Portkey, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%w: node not found: %v", ErrPeerUnavailable, err)
	}
	script, err := InstallPortkey(ctx, dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Portkey{URL: "http://127.0.0.1:" + strconv.Itoa(port), upstream: base + "/v1", out: &ringBuffer{max: 8 << 10}, done: make(chan struct{})}
	// The gateway has no flag for its address and listens on every
	// interface: a preload makes its server listen on loopback only.
	preload := filepath.Join(dir, "evalflow-loopback.mjs")
	if err := os.WriteFile(preload, []byte(loopbackPreload), 0o644); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
	}
	p.cmd = exec.Command(node, "--import", "file://"+preload, script, "--port="+strconv.Itoa(port), "--headless")
	p.cmd.Dir = dir
	// production: no log viewer or UI routes, as a deployed gateway runs.
	p.cmd.Env = append(os.Environ(), "NODE_ENV=production")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start portkey: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := p.waitReady(ctx, 60*time.Second); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// loopbackPreload makes a Node server given a port and no host listen on
// 127.0.0.1 instead of every interface.
const loopbackPreload = `import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && (args[1] === undefined || typeof args[1] === "function")) {
    if (args[1] === undefined) args[1] = "127.0.0.1"; else args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
`

// waitReady polls the gateway's root until it answers, the process ends,
// or d passes.
func (p *Portkey) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(p.URL + "/")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("portkey exited before it answered (%v): %s", p.err, p.out.String())
		case <-deadline.C:
			return fmt.Errorf("portkey did not answer within %v: %s", d, p.out.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Target is a target on the gateway's chat completions route: the OpenAI
// provider with the mock as its custom host.
func (p *Portkey) Target(name string, body []byte) loadgen.Target {
	return loadgen.Target{Name: name, URL: p.URL + Path(Chat), Body: body, Header: func() http.Header {
		return http.Header{
			"Authorization":         {"Bearer sk-bench"},
			"X-Portkey-Provider":    {"openai"},
			"X-Portkey-Custom-Host": {p.upstream},
		}
	}}
}

// CPU is the CPU time (user and system) the gateway's process has used.
func (p *Portkey) CPU() time.Duration { return processCPU(p.cmd.Process.Pid) }

// Output is the tail of what the gateway wrote to stdout and stderr.
func (p *Portkey) Output() string { return p.out.String() }

// Close stops the gateway's process group and waits for it.
func (p *Portkey) Close() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// processCPU reads a process's user and system time from /proc; 0 when it
// cannot.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields count from after it.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// freePort is a loopback TCP port free at the time of the call.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ringBuffer keeps the last max bytes written to it.
type ringBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (r *ringBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b = append(r.b, p...)
	if len(r.b) > r.max {
		r.b = append(r.b[:0], r.b[len(r.b)-r.max:]...)
	}
	return len(p), nil
}

func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(bytes.TrimSpace(r.b))
}

// tail is the last n bytes of b, as text.
func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
