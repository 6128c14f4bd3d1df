package tunnel

import (
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
	"runtime"
	"strconv"
	"sync"
	"time"

	frpclient "github.com/fatedier/frp/client"
	frpauth "github.com/fatedier/frp/pkg/auth"
	v1 "github.com/fatedier/frp/pkg/config/v1"
	"github.com/fatedier/frp/pkg/msg"
	frplog "github.com/fatedier/frp/pkg/util/log"
	frpnet "github.com/fatedier/frp/pkg/util/net"
	"github.com/fatedier/frp/pkg/util/version"
)

// DefaultFRPPort is frps's default bind port.
const DefaultFRPPort = 7000

// FRP exposes a port through the user's frps server with an embedded frp
// client: one client and one TCP proxy per exposure, on a port frps assigns.
// Consumers reach it at http://PublicHost:<assigned port>.
type FRP struct {
	// ServerAddr and ServerPort locate frps (port: DefaultFRPPort when 0).
	ServerAddr string
	ServerPort int
	// Token authenticates to frps. It is a credential: it comes from the
	// worker's flags or environment and is never logged.
	Token string
	// PublicHost is the host consumers dial to reach proxied ports; ServerAddr
	// when empty.
	PublicHost string
	// PlainTransport turns off TLS between the client and frps.
	PlainTransport bool
	// Timeout bounds one attempt at bringing a proxy up; 30 s when 0.
	Timeout time.Duration
	// Limiter bounds creations; Creations when nil.
	Limiter *Limiter
	Retry   Retry
}

var _ Tunnel = (*FRP)(nil)

// Validate reports a configuration that cannot work.
func (f *FRP) Validate() error {
	if f.ServerAddr == "" {
		return errors.New("frp tunnel: server address is required")
	}
	if f.ServerPort < 0 || f.ServerPort > 65535 {
		return fmt.Errorf("frp tunnel: server port %d is not a TCP port", f.ServerPort)
	}
	return nil
}

// BindHost implements Tunnel: frpc connects to the server on loopback.
func (*FRP) BindHost() string { return "127.0.0.1" }

// frp logs through a global logger: quiet it before any frp code runs.
func init() { frplog.InitLogger("console", "error", 0, true) }

// Expose implements Tunnel.
func (f *FRP) Expose(ctx context.Context, host string, port int) (Exposure, error) {
	if err := f.Validate(); err != nil {
		return nil, &Error{Tunnel: "frp", Op: "expose", Err: err}
	}
	exp, err := f.Retry.create(ctx, f.Limiter, func(ctx context.Context) (Exposure, error) {
		return f.start(ctx, host, port)
	})
	if err != nil {
		return nil, &Error{Tunnel: "frp", Op: "expose", Err: err}
	}
	return exp, nil
}

// start logs in to frps, asks for one TCP proxy on a port frps picks, and
// waits for frps's answer. It drives frp's Control directly rather than its
// Service: the Service reconnects on its own (the pool's monitor does that
// here) and its shutdown races with its reconnect loop.
func (f *FRP) start(ctx context.Context, host string, port int) (*frpExposure, error) {
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancelWait := context.WithTimeout(ctx, timeout)
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
	e := &frpExposure{name: "evalflow-" + randomID(), cancel: cancel, answer: make(chan *msg.NewProxyResp, 1)}
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
	sniff := newSniffConn(conn, rw, e.name, e.answer)
	ctl, err := frpclient.NewControl(runCtx, &frpclient.SessionContext{
		Common: common, RunID: runID, Conn: sniff, ConnEncrypted: false, Auth: auth, Connector: connector,
	})
	if err != nil {
		cancel()
		_ = connector.Close()
		return nil, fmt.Errorf("frp control: %w", err)
	}
	e.ctl = ctl
	pcfg := &v1.TCPProxyConfig{ProxyBaseConfig: v1.ProxyBaseConfig{
		Name: e.name, Type: string(v1.ProxyTypeTCP),
		ProxyBackend: v1.ProxyBackend{LocalIP: host, LocalPort: port},
	}}
	pcfg.Complete()
	ctl.Run([]v1.ProxyConfigurer{pcfg}, nil)

	select {
	case <-ctl.Done():
		_ = e.Close()
		return nil, errors.New("frps closed the control connection")
	case <-ctx.Done():
		_ = e.Close()
		return nil, fmt.Errorf("frp proxy did not come up: %w", ctx.Err())
	case resp := <-e.answer:
		if resp.Error != "" {
			_ = e.Close()
			return nil, fmt.Errorf("frps refused the proxy: %s", resp.Error)
		}
		remote, err := remotePort(resp.RemoteAddr)
		if err != nil {
			_ = e.Close()
			return nil, err
		}
		public := f.PublicHost
		if public == "" {
			public = f.ServerAddr
		}
		e.url = "http://" + net.JoinHostPort(public, strconv.Itoa(remote))
		return e, nil
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

// frpExposure is one control session to frps with its one proxy.
type frpExposure struct {
	name   string
	url    string
	ctl    *frpclient.Control
	cancel context.CancelFunc
	answer chan *msg.NewProxyResp

	closeOnce sync.Once
}

var _ Watched = (*frpExposure)(nil)

func (e *frpExposure) URL() string { return e.url }

// Err implements Watched: the control connection to frps is gone (frps
// stopped, restarted or dropped us), and with it the proxy.
func (e *frpExposure) Err() error {
	select {
	case <-e.ctl.Done():
		return errors.New("frp control connection closed")
	default:
		return nil
	}
}

// Close closes the proxy and the session; frps frees the port.
func (e *frpExposure) Close() error {
	e.closeOnce.Do(func() {
		if e.ctl != nil {
			_ = e.ctl.GracefulClose(0)
			<-e.ctl.Done()
		}
		e.cancel()
	})
	return nil
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
