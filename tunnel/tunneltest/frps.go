package tunneltest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	v1 "github.com/fatedier/frp/pkg/config/v1"
	frplog "github.com/fatedier/frp/pkg/util/log"
	frpserver "github.com/fatedier/frp/server"
	"github.com/stretchr/testify/require"
)

// FRPS is an frps server (frp's server package) running in a child process
// of the test: frps's own data races (v0.68.1 closes a work-connection
// channel that a registering connection may still send on) would otherwise
// fail every -race test that carries traffic. The child is the test binary
// itself; the package's TestMain must call ServeFRPSIfAsked first.
type FRPS struct {
	// Addr is the host the server and its proxies listen on.
	Addr string
	// Port is the control port frpc connects to.
	Port int
	// Token authenticates clients.
	Token string

	t         testing.TB
	dashboard int
	cmd       *exec.Cmd
	exited    chan struct{}
}

// frpsEnv carries the child's configuration.
const frpsEnv = "EVALFLOW_TUNNELTEST_FRPS"

type frpsConfig struct {
	Addr      string `json:"addr"`
	Port      int    `json:"port"`
	Token     string `json:"token"`
	Dashboard int    `json:"dashboard"`
}

// ServeFRPSIfAsked runs frps and never returns when this process is a child
// started by StartFRPS; otherwise it returns at once. Call it first in
// TestMain.
func ServeFRPSIfAsked() {
	raw := os.Getenv(frpsEnv)
	if raw == "" {
		return
	}
	var c frpsConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, "frps config:", err)
		os.Exit(2)
	}
	cfg := &v1.ServerConfig{BindAddr: c.Addr, BindPort: c.Port, ProxyBindAddr: c.Addr}
	cfg.Auth.Token = c.Token
	cfg.WebServer = v1.WebServerConfig{Addr: "127.0.0.1", Port: c.Dashboard, User: "admin", Password: "admin"}
	cfg.Log.Level = "error"
	if err := cfg.Complete(); err != nil {
		fmt.Fprintln(os.Stderr, "frps config:", err)
		os.Exit(2)
	}
	frplog.InitLogger("console", "error", 0, true)
	svc, err := frpserver.NewService(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "frps:", err)
		os.Exit(2)
	}
	svc.Run(context.Background())
	os.Exit(0)
}

// StartFRPS starts frps on 127.0.0.1 and stops it when the test ends.
func StartFRPS(t testing.TB) *FRPS { return StartFRPSOn(t, "127.0.0.1") }

// StartFRPSOn starts frps with its control port and proxies on addr. It
// always has a token (generated), as a real one must.
func StartFRPSOn(t testing.TB, addr string) *FRPS {
	t.Helper()
	f := &FRPS{Addr: addr, Port: FreePort(t, addr), Token: "frps-test-token-" + strconv.Itoa(FreePort(t, "127.0.0.1")), t: t, dashboard: FreePort(t, "127.0.0.1")}
	f.start()
	t.Cleanup(f.Kill)
	return f
}

func (f *FRPS) start() {
	f.t.Helper()
	raw, err := json.Marshal(frpsConfig{Addr: f.Addr, Port: f.Port, Token: f.Token, Dashboard: f.dashboard})
	require.NoError(f.t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), frpsEnv+"="+string(raw), "GORACE=exitcode=0 log_path=/dev/null")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	require.NoError(f.t, cmd.Start(), "start frps")
	f.cmd, f.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(f.exited)
	}()
	WaitListening(f.t, net.JoinHostPort(f.Addr, strconv.Itoa(f.Port)))
	WaitListening(f.t, net.JoinHostPort("127.0.0.1", strconv.Itoa(f.dashboard)))
}

// Kill kills frps as a crash would: every client and proxy is cut off.
func (f *FRPS) Kill() {
	if f.cmd == nil {
		return
	}
	_ = f.cmd.Process.Kill()
	<-f.exited
	f.cmd = nil
}

// Restart starts a fresh frps on the same ports after Kill.
func (f *FRPS) Restart() {
	f.t.Helper()
	f.Kill()
	f.start()
}

// Proxy is a proxy as frps reports it.
type Proxy struct {
	Name   string
	Status string
}

// OnlineProxies asks frps's dashboard API which TCP proxies are online.
func (f *FRPS) OnlineProxies() ([]string, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/proxy/tcp", f.dashboard), nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("admin", "admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("frps dashboard: %s", resp.Status)
	}
	var body struct {
		Proxies []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"proxies"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var online []string
	for _, p := range body.Proxies {
		if p.Status == "online" {
			online = append(online, p.Name)
		}
	}
	return online, nil
}

// FreePort returns a port free on host at the time of the call.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitListening waits until something accepts connections at addr.
func WaitListening(t testing.TB, addr string) {
	t.Helper()
	require.Eventually(t, func() bool { return Listening(addr) }, 30*time.Second, 10*time.Millisecond, "nothing listens on %s", addr)
}

// Listening reports whether a TCP connection to addr is accepted.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
