package tunneltest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// SSHDPath is where Debian's openssh-server installs sshd.
const SSHDPath = "/usr/sbin/sshd"

// SSHD is an OpenSSH server run for a test, allowing reverse forwards on any
// address the client asks for (GatewayPorts clientspecified).
type SSHD struct {
	// Addr is host:port of the server.
	Addr string
	// User, KeyFile and KnownHostsFile are what a client needs.
	User, KeyFile, KnownHostsFile string

	t      testing.TB
	config string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartSSHD starts sshd on 127.0.0.1 and stops it when the test ends. It
// skips the test when sshd is not installed or the test is not root.
func StartSSHD(t testing.TB) *SSHD { return StartSSHDOn(t, "127.0.0.1") }

// StartSSHDOn starts sshd listening on host.
func StartSSHDOn(t testing.TB, host string) *SSHD {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		t.Skipf("openssh-server is not installed (%s)", SSHDPath)
	}
	if os.Geteuid() != 0 {
		t.Skip("sshd needs root")
	}
	require.NoError(t, os.MkdirAll("/run/sshd", 0o755))
	dir := t.TempDir()

	hostPub, hostKey := newKey(t)
	clientPub, clientKey := newKey(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	hostKeyFile := write("host_key", hostKey)
	auth := write("authorized_keys", ssh.MarshalAuthorizedKey(clientPub))
	port := FreePort(t, host)
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	hostLine := fmt.Sprintf("[%s]:%d %s", host, port, ssh.MarshalAuthorizedKey(hostPub))
	s := &SSHD{
		Addr: addr, User: "root",
		KeyFile:        write("id_ed25519", clientKey),
		KnownHostsFile: write("known_hosts", []byte(hostLine)),
		t:              t,
		config: write("sshd_config", fmt.Appendf(nil, `ListenAddress %s
Port %d
HostKey %s
AuthorizedKeysFile %s
PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding remote
GatewayPorts clientspecified
ClientAliveInterval 0
LogLevel ERROR
`, host, port, hostKeyFile, auth)),
	}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

func (s *SSHD) start() {
	s.t.Helper()
	cmd := exec.Command(SSHDPath, "-D", "-e", "-f", s.config)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(s.t, cmd.Start(), "start sshd")
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	WaitListening(s.t, s.Addr)
}

// Kill kills sshd and every session process it started, as a crash would.
func (s *SSHD) Kill() {
	if s.cmd == nil {
		return
	}
	// Session processes call setsid, so they are found by parentage.
	for _, pid := range append(descendants(s.cmd.Process.Pid), s.cmd.Process.Pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-s.exited
	s.cmd = nil
}

// Restart starts sshd again on the same address after Kill.
func (s *SSHD) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// descendants lists the processes below pid, children first.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			walk(c)
			out = append(out, c)
		}
	}
	walk(pid)
	return out
}

func newKey(t testing.TB) (ssh.PublicKey, []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	sshPub, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	return sshPub, pem.EncodeToMemory(block)
}
