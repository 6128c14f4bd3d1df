package tunnel_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// startAgent serves an in-memory ssh-agent holding the key in keyFile at
// $SSH_AUTH_SOCK.
func startAgent(t *testing.T, keyFile string) {
	t.Helper()
	pem, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	raw, err := ssh.ParseRawPrivateKey(pem)
	require.NoError(t, err)
	keyring := agent.NewKeyring()
	require.NoError(t, keyring.Add(agent.AddedKey{PrivateKey: raw}))
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveAgent(keyring, c)
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
}

// serveAgent answers one agent client on c until it hangs up.
func serveAgent(keyring agent.Agent, c net.Conn) {
	defer c.Close()
	_ = agent.ServeAgent(keyring, c)
}

func TestSSHAuth(t *testing.T) {
	sshd := tunneltest.StartSSHD(t)
	host, port := backend(t)
	strangerKnownHosts := filepath.Join(t.TempDir(), "known_hosts")
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	spub, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	_, sshdPort, _ := net.SplitHostPort(sshd.Addr)
	require.NoError(t, os.WriteFile(strangerKnownHosts, []byte("[127.0.0.1]:"+sshdPort+" "+string(ssh.MarshalAuthorizedKey(spub))), 0o600))

	tests := []struct {
		name    string
		tun     *tunnel.SSH
		agent   bool
		wantErr string
	}{
		{"key file", &tunnel.SSH{Addr: sshd.Addr, User: sshd.User, KeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHostsFile}, false, ""},
		{"agent", &tunnel.SSH{Addr: sshd.Addr, User: sshd.User, UseAgent: true, KnownHostsFile: sshd.KnownHostsFile}, true, ""},
		{"unknown key", &tunnel.SSH{Addr: sshd.Addr, User: sshd.User, KeyFile: writeKey(t), KnownHostsFile: sshd.KnownHostsFile, Retry: tunnel.Retry{Attempts: 1}}, false, "unable to authenticate"},
		{"host key mismatch", &tunnel.SSH{Addr: sshd.Addr, User: sshd.User, KeyFile: sshd.KeyFile, KnownHostsFile: strangerKnownHosts, Retry: tunnel.Retry{Attempts: 1}}, false, "key mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.agent {
				startAgent(t, sshd.KeyFile)
			}
			exp, err := tt.tun.Expose(context.Background(), host, port)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.True(t, tunnel.IsError(err))
				return
			}
			require.NoError(t, err)
			defer exp.Close()
			assert.Equal(t, "ok /a", get(t, exp.URL()+"/a"))
		})
	}
}
