package tunnel_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// server is one tunnel implementation with its server side.
type server struct {
	name string
	// start returns the tunnel, a kill of its server side, and how many
	// forwards the server side holds (-1: it cannot tell).
	start func(t *testing.T) (tun tunnel.Tunnel, kill func(), held func() int)
}

func servers() []server {
	return []server{
		{"frp", func(t *testing.T) (tunnel.Tunnel, func(), func() int) {
			frps := tunneltest.StartFRPS(t)
			tun := &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}
			return tun, frps.Kill, func() int {
				online, err := frps.OnlineProxies()
				require.NoError(t, err)
				return len(online)
			}
		}},
		{"ssh", func(t *testing.T) (tunnel.Tunnel, func(), func() int) {
			sshd := tunneltest.StartSSHD(t)
			tun := &tunnel.SSH{Addr: sshd.Addr, User: sshd.User, KeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHostsFile}
			return tun, sshd.Kill, func() int { return -1 }
		}},
	}
}

// backend is the HTTP server a tunnel exposes, answering the health route.
func backend(t *testing.T) (host string, port int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return u.Hostname(), mustPort(t, u)
}

func mustPort(t *testing.T, u *url.URL) int {
	t.Helper()
	p, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return p
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestExposeReachesAndCloses(t *testing.T) {
	for _, s := range servers() {
		t.Run(s.name, func(t *testing.T) {
			tun, _, held := s.start(t)
			host, port := backend(t)
			ctx := context.Background()

			exp, err := tun.Expose(ctx, host, port)
			require.NoError(t, err)
			assert.Equal(t, "ok /x", get(t, exp.URL()+"/x"), "GET through %s", exp.URL())
			require.NoError(t, tunnel.Check(ctx, s.name, exp))
			if n := held(); n >= 0 {
				assert.Equal(t, 1, n, "forwards held by the server")
			}

			u, err := url.Parse(exp.URL())
			require.NoError(t, err)
			require.NoError(t, exp.Close())
			// The server side drops the forward with the connection.
			require.Eventually(t, func() bool { return !tunneltest.Listening(u.Host) }, waitFor, tick, "%s still listens after Close", u.Host)
			if held() >= 0 {
				require.Eventually(t, func() bool { return held() == 0 }, waitFor, tick, "forwards held after Close")
			}
			assert.Error(t, tunnel.Check(ctx, s.name, exp), "check after Close")
		})
	}
}

func TestCheckNoticesDeadServer(t *testing.T) {
	for _, s := range servers() {
		t.Run(s.name, func(t *testing.T) {
			tun, kill, _ := s.start(t)
			host, port := backend(t)
			exp, err := tun.Expose(context.Background(), host, port)
			require.NoError(t, err)
			defer exp.Close()
			require.NoError(t, tunnel.Check(context.Background(), s.name, exp))

			kill()
			require.Eventually(t, func() bool {
				err := tunnel.Check(context.Background(), s.name, exp)
				return err != nil
			}, waitFor, tick)
			err = tunnel.Check(context.Background(), s.name, exp)
			assert.ErrorIs(t, err, tunnel.ErrDead)
			assert.True(t, tunnel.IsError(err), "Check(dead) = %T, want *tunnel.Error", err)
		})
	}
}

func TestExposeUnreachableServer(t *testing.T) {
	port := tunneltest.FreePort(t, "127.0.0.1")
	tests := []struct {
		name string
		tun  tunnel.Tunnel
	}{
		{"frp", &tunnel.FRP{ServerAddr: "127.0.0.1", ServerPort: port, Token: "t", Retry: tunnel.Retry{Attempts: 2}}},
		{"ssh", &tunnel.SSH{Addr: "127.0.0.1:" + itoa(port), User: "u", KeyFile: writeKey(t), KnownHostsFile: "/dev/null", Retry: tunnel.Retry{Attempts: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tun.Expose(context.Background(), "127.0.0.1", 1)
			require.Error(t, err)
			var te *tunnel.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.name, te.Tunnel)
			assert.Equal(t, "expose", te.Op)
		})
	}
}
