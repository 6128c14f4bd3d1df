package tunnel

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	frpclient "github.com/fatedier/frp/client"
	frpauth "github.com/fatedier/frp/pkg/auth"
	v1 "github.com/fatedier/frp/pkg/config/v1"
	"github.com/fatedier/frp/pkg/msg"
	frplog "github.com/fatedier/frp/pkg/util/log"
	frpnet "github.com/fatedier/frp/pkg/util/net"
	"github.com/fatedier/frp/pkg/util/version"
	golog "github.com/fatedier/golib/log"
)

// This file is the frp client process: the child FRP.Expose starts, one per
// exposure. It reads its frpClientRequest from stdin, brings the proxy up,
// writes one frpClientAnswer line to stdout, then holds the proxy until its
// stdin closes (exit 0) or frps drops its control connection (exit
// exitControlLost).

// frpClientEnv selects the child: a process started with it set serves one
// exposure in ServeFRPClientIfAsked instead of running its main.
const frpClientEnv = "EVALFLOW_FRP_CLIENT"

// exitControlLost is the child's exit status when frps ended its control
// connection, and with it the proxy.
const exitControlLost = 3

// frpClientRequest is the child's configuration, one JSON line on its stdin:
// the token is a credential, kept out of argv and the environment.
type frpClientRequest struct {
	ServerAddr     string        `json:"server_addr"`
	ServerPort     int           `json:"server_port"`
	Token          string        `json:"token"`
	PublicHost     string        `json:"public_host"`
	PlainTransport bool          `json:"plain_transport"`
	Timeout        time.Duration `json:"timeout"`
	// Host and Port are what the proxy exposes.
	Host string `json:"host"`
	Port int    `json:"port"`
}

// frpClientAnswer is the child's one line on stdout: exactly one field is set.
type frpClientAnswer struct {
	URL   string `json:"url,omitempty"`
	Error string `json:"error,omitempty"`
}

// ServeFRPClientIfAsked runs an frp client and exits when this process was
// started by FRP.Expose as its client process; otherwise it returns at once.
// Every binary that exposes ports through FRP calls it first in main, test
// binaries first in TestMain.
func ServeFRPClientIfAsked() {
	if os.Getenv(frpClientEnv) == "" {
		return
	}
	os.Exit(serveFRPClient(os.Stdin, os.Stdout, os.Stderr))
}

// serveFRPClient is the child's life; it returns its exit status.
func serveFRPClient(in io.Reader, out, errOut io.Writer) int {
	// The parent alone ends the client (closing stdin, killing it, or dying):
	// an interrupt or SIGTERM sent to the whole process group must not cut
	// the tunnel under rollouts the parent is still draining.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	// frp logs to stdout, which carries the answer here.
	frplog.Logger = frplog.Logger.WithOptions(golog.WithOutput(errOut), golog.WithLevel(golog.ErrorLevel))

	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(errOut, "frp client: read configuration:", err)
		return 2
	}
	var req frpClientRequest
	if err := json.Unmarshal(line, &req); err != nil {
		fmt.Fprintln(errOut, "frp client: decode configuration:", err)
		return 2
	}
	f := &FRP{
		ServerAddr: req.ServerAddr, ServerPort: req.ServerPort, Token: req.Token,
		PublicHost: req.PublicHost, PlainTransport: req.PlainTransport, Timeout: req.Timeout,
	}
	s, err := f.start(context.Background(), req.Host, req.Port)
	if err != nil {
		_ = json.NewEncoder(out).Encode(frpClientAnswer{Error: err.Error()})
		return 1
	}
	if err := json.NewEncoder(out).Encode(frpClientAnswer{URL: s.url}); err != nil {
		_ = s.Close()
		return 2
	}

	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(stdinClosed)
	}()
	select {
	case <-stdinClosed:
		_ = s.Close()
		return 0
	case <-s.ctl.Done():
		fmt.Fprintln(errOut, "frps closed the control connection")
		_ = s.Close()
		return exitControlLost
	}
}

// start logs in to frps, asks for one TCP proxy on a port frps picks, and
// waits for frps's answer. It drives frp's Control directly rather than its
// Service: the Service reconnects on its own (the pool's monitor does that
// here) and its shutdown races with its reconnect loop.
func (f *FRP) start(ctx context.Context, host string, port int) (*frpSession, error) {
	ctx, cancelWait := context.WithTimeout(ctx, f.timeout())
	defer cancelWait()

	common := &v1.ClientCommonConfig{ServerAddr: f.ServerAddr, ServerPort: f.ServerPort}
	if common.ServerPort == 0 {
		common.ServerPort = DefaultFRPPort
	}
	common.Auth.Token = f.Token
	tls := !f.PlainTransport
	common.Transport.TLS.Enable = &tls
	if err := common.Complete(); err != nil {
		return nil, fmt.Errorf("frp client config: %w", err)
	}
	auth, err := frpauth.BuildClientAuth(&common.Auth)
	if err != nil {
		return nil, fmt.Errorf("frp client auth: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	s := &frpSession{name: "evalflow-" + randomID(), cancel: cancel, answer: make(chan *msg.NewProxyResp, 1)}
	stop := context.AfterFunc(ctx, cancel) // abandon a login that outlives the attempt
	defer stop()
	connector := frpclient.NewConnector(runCtx, common)
	conn, runID, err := frpLogin(connector, common, auth)
	if err != nil {
		cancel()
		_ = connector.Close()
		return nil, err
	}
	rw, err := frpnet.NewCryptoReadWriter(conn, auth.EncryptionKey())
	if err != nil {
		cancel()
		_ = connector.Close()
		return nil, fmt.Errorf("frp control encryption: %w", err)
	}
	sniff := newSniffConn(conn, rw, s.name, s.answer)
	ctl, err := frpclient.NewControl(runCtx, &frpclient.SessionContext{
		Common: common, RunID: runID, Conn: sniff, ConnEncrypted: false, Auth: auth, Connector: connector,
	})
	if err != nil {
		cancel()
		_ = connector.Close()
		return nil, fmt.Errorf("frp control: %w", err)
	}
	s.ctl = ctl
	pcfg := &v1.TCPProxyConfig{ProxyBaseConfig: v1.ProxyBaseConfig{
		Name: s.name, Type: string(v1.ProxyTypeTCP),
		ProxyBackend: v1.ProxyBackend{LocalIP: host, LocalPort: port},
	}}
	pcfg.Complete()
	ctl.Run([]v1.ProxyConfigurer{pcfg}, nil)

	select {
	case <-ctl.Done():
		_ = s.Close()
		return nil, errors.New("frps closed the control connection")
	case <-ctx.Done():
		_ = s.Close()
		return nil, fmt.Errorf("frp proxy did not come up: %w", ctx.Err())
	case resp := <-s.answer:
		if resp.Error != "" {
			_ = s.Close()
			return nil, fmt.Errorf("frps refused the proxy: %s", resp.Error)
		}
		remote, err := remotePort(resp.RemoteAddr)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.url = "http://" + net.JoinHostPort(f.publicHost(), strconv.Itoa(remote))
		return s, nil
	}
}

// frpLogin opens the connection to frps and logs in.
func frpLogin(connector frpclient.Connector, common *v1.ClientCommonConfig, auth *frpauth.ClientAuth) (net.Conn, string, error) {
	if err := connector.Open(); err != nil {
		return nil, "", fmt.Errorf("connect to frps: %w", err)
	}
	conn, err := connector.Connect()
	if err != nil {
		return nil, "", fmt.Errorf("connect to frps: %w", err)
	}
	hostname, _ := os.Hostname()
	login := &msg.Login{
		Arch: runtime.GOARCH, Os: runtime.GOOS, Hostname: hostname,
		PoolCount: common.Transport.PoolCount, User: common.User,
		Version: version.Full(), Timestamp: time.Now().Unix(),
	}
	if err := auth.Setter.SetLogin(login); err != nil {
		return nil, "", fmt.Errorf("frp login: %w", err)
	}
	if err := msg.WriteMsg(conn, login); err != nil {
		return nil, "", fmt.Errorf("frp login: %w", err)
	}
	var resp msg.LoginResp
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := msg.ReadMsgInto(conn, &resp); err != nil {
		return nil, "", fmt.Errorf("frp login: %w", err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if resp.Error != "" {
		return nil, "", fmt.Errorf("frps refused the login: %s", resp.Error)
	}
	return conn, resp.RunID, nil
}

// sniffConn is the decrypted control connection. It parses what Control
// reads to pick out frps's answer to our proxy (Control keeps the assigned
// port to itself). Control reads one message in exact pieces (type, length,
// body) and handles it before reading on, so the answer is passed on at the
// next Read: by then Control has marked the proxy running and accepts work
// connections for it.
type sniffConn struct {
	net.Conn
	rw     io.ReadWriter
	name   string
	answer chan<- *msg.NewProxyResp
	buf    []byte
	found  *msg.NewProxyResp
	done   bool
}

func newSniffConn(conn net.Conn, rw io.ReadWriter, name string, answer chan<- *msg.NewProxyResp) *sniffConn {
	return &sniffConn{Conn: conn, rw: rw, name: name, answer: answer}
}

// Read is called by Control's one reading goroutine only.
func (c *sniffConn) Read(p []byte) (int, error) {
	if c.found != nil {
		c.answer <- c.found
		c.found, c.done = nil, true
	}
	n, err := c.rw.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		c.parse()
	}
	return n, err
}

// parse consumes whole messages from buf: a type byte, a big-endian int64
// length, a JSON body.
func (c *sniffConn) parse() {
	for len(c.buf) >= 9 {
		length := int64(binary.BigEndian.Uint64(c.buf[1:9]))
		if length < 0 || length > 1<<20 {
			c.done, c.buf = true, nil // not frp's framing: give up, Control will fail
			return
		}
		if int64(len(c.buf)) < 9+length {
			return
		}
		typ, body := c.buf[0], c.buf[9:9+length]
		c.buf = c.buf[9+length:]
		var r msg.NewProxyResp
		if typ == msg.TypeNewProxyResp && json.Unmarshal(body, &r) == nil && r.ProxyName == c.name {
			c.found, c.buf = &r, nil
			return
		}
	}
}

func (c *sniffConn) Write(p []byte) (int, error) { return c.rw.Write(p) }

func remotePort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("frps remote address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 {
		return 0, fmt.Errorf("frps remote address %q has no port", addr)
	}
	return port, nil
}

// frpSession is one control session to frps with its one proxy.
type frpSession struct {
	name   string
	url    string
	ctl    *frpclient.Control
	cancel context.CancelFunc
	answer chan *msg.NewProxyResp

	closeOnce sync.Once
}

// Close closes the proxy and the session; frps frees the port.
func (s *frpSession) Close() error {
	s.closeOnce.Do(func() {
		if s.ctl != nil {
			_ = s.ctl.GracefulClose(0)
			<-s.ctl.Done()
		}
		s.cancel()
	})
	return nil
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
