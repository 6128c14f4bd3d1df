package tunnel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultFRPPort is frps's default bind port.
const DefaultFRPPort = 7000

// FRP exposes a port through the user's frps server with frp's client
// library: one client, one control session and one TCP proxy per exposure,
// on a port frps assigns. Consumers reach it at
// http://PublicHost:<assigned port>.
//
// Each client runs in a child process: this same binary started again, which
// ServeFRPClientIfAsked turns into the client (every binary using FRP calls
// it first in main). frp's client has data races of its own (v0.68.1:
// proxy.Wrapper.InWorkConn reads a proxy's phase without the lock
// Wrapper.Stop writes it under), which failed -race tests whose traffic
// crossed a tunnel being closed; in a child they are out of the race
// detector's reach, and the client's goroutines end with its exposure. The
// child dies with its parent.
type FRP struct {
	// ServerAddr and ServerPort locate frps (port: DefaultFRPPort when 0).
	ServerAddr string
	ServerPort int
	// Token authenticates to frps. It is a credential: it comes from the
	// worker's flags or environment, is never logged, and reaches the client
	// process on its stdin only (never its arguments or environment). It is
	// required: without one, anyone who reaches frps can register proxies.
	Token string
	// AllowEmptyToken accepts an empty Token, for tests against an frps on
	// loopback only: Validate refuses it for any other ServerAddr.
	AllowEmptyToken bool
	// PublicHost is the host consumers dial to reach proxied ports; ServerAddr
	// when empty.
	PublicHost string
	// PlainTransport turns off TLS between the client and frps.
	PlainTransport bool
	// Timeout bounds one attempt at bringing a proxy up, once its client
	// process runs; 30 s when 0.
	Timeout time.Duration
	// Limiter bounds creations (a HostLimiter shares the host's budget
	// among its workers); nil allows DefaultCreationsPerMinute in this
	// process.
	Limiter Limiter
	Retry   Retry
}

var _ Tunnel = (*FRP)(nil)

// ErrNoToken is Validate's error for an FRP without a Token (and without
// AllowEmptyToken).
var ErrNoToken = errors.New("frp tunnel: a token is required")

// Validate reports a configuration that cannot work.
func (f *FRP) Validate() error {
	if f.ServerAddr == "" {
		return errors.New("frp tunnel: server address is required")
	}
	if f.ServerPort < 0 || f.ServerPort > 65535 {
		return fmt.Errorf("frp tunnel: server port %d is not a TCP port", f.ServerPort)
	}
	if f.Token == "" {
		if !f.AllowEmptyToken {
			return ErrNoToken
		}
		if !isLoopbackIP(f.ServerAddr) {
			return fmt.Errorf("frp tunnel: an empty token is allowed only for an frps on a loopback address, not %q", f.ServerAddr)
		}
	}
	return nil
}

// isLoopbackIP reports whether host is a loopback IP address. A name, even
// "localhost", is not trusted to resolve to one.
func isLoopbackIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// BindHost implements Tunnel: frpc connects to the server on loopback.
func (*FRP) BindHost() string { return "127.0.0.1" }

func (f *FRP) timeout() time.Duration {
	if f.Timeout <= 0 {
		return 30 * time.Second
	}
	return f.Timeout
}

func (f *FRP) publicHost() string {
	if f.PublicHost == "" {
		return f.ServerAddr
	}
	return f.PublicHost
}

// Expose implements Tunnel.
func (f *FRP) Expose(ctx context.Context, host string, port int) (Exposure, error) {
	if err := f.Validate(); err != nil {
		return nil, &Error{Tunnel: "frp", Op: "expose", Err: err}
	}
	exp, err := f.Retry.create(ctx, f.Limiter, func(ctx context.Context) (Exposure, error) {
		return f.launch(ctx, host, port)
	})
	if err != nil {
		return nil, &Error{Tunnel: "frp", Op: "expose", Err: err}
	}
	return exp, nil
}

// Bounds of the client process's life seen from the parent.
const (
	// frpClientStartup is how much longer than Timeout the parent waits for
	// the answer: the child has to start before its Timeout runs.
	frpClientStartup = 5 * time.Second
	// frpClientExit is how long Close waits for the child to close its
	// proxy and exit before it kills it.
	frpClientExit = 10 * time.Second
)

// frpClientCommand is the client process's program and arguments: this
// executable, which serves the client in ServeFRPClientIfAsked. A test
// binary also gets a -test.run matching nothing, so one whose TestMain does
// not serve the client exits at once rather than running its tests again.
var frpClientCommand = func() (string, []string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find this executable: %w", err)
	}
	if testing.Testing() {
		return exe, []string{"-test.run=^$"}, nil
	}
	return exe, nil, nil
}

// notServed ends errors that suggest the child ran something else than the
// frp client.
const notServed = "is tunnel.ServeFRPClientIfAsked called first in main (TestMain in tests)?"

// launch starts one client process and waits for its answer.
func (f *FRP) launch(ctx context.Context, host string, port int) (*frpExposure, error) {
	if os.Getenv(frpClientEnv) != "" {
		// Started as a client, this process ran its main instead: starting
		// a client of its own would only repeat that.
		return nil, errors.New("this process was started as an frp client but ran its main instead; " + notServed)
	}
	name, args, err := frpClientCommand()
	if err != nil {
		return nil, fmt.Errorf("start frp client: %w", err)
	}
	req, err := json.Marshal(frpClientRequest{
		ServerAddr: f.ServerAddr, ServerPort: f.ServerPort, Token: f.Token,
		PublicHost: f.publicHost(), PlainTransport: f.PlainTransport, Timeout: f.timeout(),
		Host: host, Port: port,
	})
	if err != nil {
		return nil, fmt.Errorf("frp client configuration: %w", err)
	}

	e := &frpExposure{exited: make(chan struct{}), stderr: &lastLines{max: 4 << 10}, secret: f.Token}
	answer := &firstLine{line: make(chan []byte, 1)}
	cmd := exec.Command(name, args...)
	// Under the race detector (test binaries), its reports on frp's own
	// races would only fill the stderr kept for error messages, and its
	// default second of sleep before exiting would slow every Close.
	cmd.Env = append(os.Environ(), frpClientEnv+"=1", "GORACE=log_path=/dev/null exitcode=0 atexit_sleep_ms=0")
	cmd.SysProcAttr = frpClientProcAttr()
	cmd.Stdout = answer
	cmd.Stderr = e.stderr
	cmd.WaitDelay = time.Second
	if e.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start frp client: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start frp client: %w", err)
	}
	e.process = cmd.Process
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	// A child that never reads its stdin is found by its answer or its exit.
	_, _ = e.stdin.Write(append(req, '\n'))

	wait, cancel := context.WithTimeout(ctx, f.timeout()+frpClientStartup)
	defer cancel()
	var line []byte
	select {
	case line = <-answer.line:
	case <-e.exited:
		// Wait returns once stdout is drained: an answer, if any, is in.
		select {
		case line = <-answer.line:
		default:
			return nil, fmt.Errorf("frp client exited without answering (%v%s); %s", e.waitErr, e.stderrTail(), notServed)
		}
	case <-wait.Done():
		e.stop(0)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("frp proxy did not come up: %w%s", ctx.Err(), e.stderrTail())
		}
		return nil, fmt.Errorf("frp client gave no answer within %s%s; %s", f.timeout()+frpClientStartup, e.stderrTail(), notServed)
	}
	var a frpClientAnswer
	if err := json.Unmarshal(line, &a); err != nil || (a.URL == "") == (a.Error == "") {
		e.stop(0)
		return nil, fmt.Errorf("frp client answered %s, neither a URL nor an error; %s", e.quote(line), notServed)
	}
	if a.Error != "" {
		e.stop(time.Second) // it exits on its own after a failure
		return nil, errors.New(e.redact(a.Error))
	}
	e.url = a.URL
	return e, nil
}

// frpExposure is one client process holding one proxy.
type frpExposure struct {
	url     string
	process *os.Process
	stdin   io.WriteCloser
	stderr  *lastLines
	secret  string // redacted from everything the child said

	exited  chan struct{}
	waitErr error // set before exited is closed

	closeOnce sync.Once
	closeErr  error
}

var _ Watched = (*frpExposure)(nil)

func (e *frpExposure) URL() string { return e.url }

// Err implements Watched: the client process is gone, and with it the proxy.
// It exits on its own when its control connection to frps ends (frps
// stopped, restarted or dropped it).
func (e *frpExposure) Err() error {
	select {
	case <-e.exited:
	default:
		return nil
	}
	if e.waitErr == nil {
		return errors.New("frp client exited")
	}
	return fmt.Errorf("frp client exited (%v%s)", e.waitErr, e.stderrTail())
}

// Close ends the client process: it closes the proxy when its stdin closes,
// and frps frees the port. A client that does not exit in time is killed.
func (e *frpExposure) Close() error {
	e.closeOnce.Do(func() {
		if !e.stop(frpClientExit) {
			e.closeErr = &Error{Tunnel: "frp", Op: "close", Err: fmt.Errorf("frp client did not exit within %s of its stdin closing; killed it", frpClientExit)}
		}
	})
	return e.closeErr
}

// stop closes the child's stdin, waits up to grace for it to exit, then
// kills it; it returns once the child is reaped, reporting whether it exited
// on its own.
func (e *frpExposure) stop(grace time.Duration) bool {
	_ = e.stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-e.exited:
		return true
	case <-t.C:
	}
	_ = e.process.Kill()
	<-e.exited
	return false
}

// stderrTail is the end of what the child wrote on stderr, as ": <text>",
// or "" when it wrote nothing.
func (e *frpExposure) stderrTail() string {
	s := e.redact(e.stderr.String())
	if s == "" {
		return ""
	}
	return ": " + s
}

// redact removes the token from text the child wrote.
func (e *frpExposure) redact(s string) string {
	if e.secret == "" {
		return s
	}
	return strings.ReplaceAll(s, e.secret, "[token]")
}

// quote quotes an unexpected answer line for an error, redacted, then cut short.
func (e *frpExposure) quote(line []byte) string {
	s := e.redact(string(line))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}

// firstLine is the child's stdout: it hands on the first line (at most 64
// KiB of it) and drops the rest.
type firstLine struct {
	line chan []byte
	buf  []byte
	sent bool
}

func (w *firstLine) Write(p []byte) (int, error) {
	if w.sent {
		return len(p), nil
	}
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		w.line <- append(w.buf, p[:i]...)
		w.buf, w.sent = nil, true
		return len(p), nil
	}
	if len(w.buf)+len(p) > 64<<10 {
		w.line <- w.buf
		w.buf, w.sent = nil, true
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// lastLines keeps the end of the child's stderr, up to max bytes.
type lastLines struct {
	max int

	mu      sync.Mutex
	buf     []byte
	trimmed bool
}

func (t *lastLines) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.trimmed = true
	}
	return len(p), nil
}

// String is the last lines kept, at most 512 bytes of them, joined by
// " | ". A line cut at the front is dropped, so that no part of a secret
// escapes redaction.
func (t *lastLines) String() string {
	t.mu.Lock()
	s := string(t.buf)
	trimmed := t.trimmed
	t.mu.Unlock()
	lines := strings.Split(s, "\n")
	if trimmed {
		lines = lines[1:]
	}
	var kept []string
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if size += len(l); size > 512 && len(kept) > 0 {
			break
		}
		kept = append(kept, l)
	}
	slices.Reverse(kept)
	return strings.Join(kept, " | ")
}
