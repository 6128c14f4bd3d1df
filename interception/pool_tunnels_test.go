package interception_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// Bounds of waits for a server side to catch up; never reached when it works.
const (
	waitFor = 30 * time.Second
	tick    = 10 * time.Millisecond
)

// remote is a tunnel kind with its server side running for the test.
type remote struct {
	name string
	// start returns the tunnel, a kill and a restart of its server side, and
	// the forwards the server side holds (nil when it cannot list them).
	start func(t *testing.T) (tun tunnel.Tunnel, kill, restart func(), held func() int)
}

func remotes() []remote {
	return []remote{
		{"frp", func(t *testing.T) (tunnel.Tunnel, func(), func(), func() int) {
			frps := tunneltest.StartFRPS(t)
			tun := &tunnel.FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}
			return tun, frps.Kill, frps.Restart, func() int {
				online, err := frps.OnlineProxies()
				require.NoError(t, err)
				return len(online)
			}
		}},
		{"ssh", func(t *testing.T) (tunnel.Tunnel, func(), func(), func() int) {
			sshd := tunneltest.StartSSHD(t)
			tun := &tunnel.SSH{Addr: sshd.Addr, User: sshd.User, KeyFile: sshd.KeyFile, KnownHostsFile: sshd.KnownHostsFile}
			return tun, sshd.Kill, sshd.Restart, nil
		}},
	}
}

// exposeAll exposes every slot concurrently and returns the URLs.
func exposeAll(t *testing.T, p *interception.Pool, slots []*interception.Registration) []string {
	t.Helper()
	urls := make([]string, len(slots))
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Go(func() { urls[i], errs[i] = s.Expose(context.Background()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return urls
}

func healthy(u string) bool {
	resp, err := http.Get(u + "/healthz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestPool128RolloutsThroughRemoteTunnels(t *testing.T) {
	for _, r := range remotes() {
		t.Run(r.name, func(t *testing.T) {
			tun, _, _, held := r.start(t)
			p := newPool(t, tun)
			slots := acquireAll(t, p, 128)
			urls := exposeAll(t, p, slots)

			distinct := map[string]bool{}
			for _, u := range urls {
				distinct[u] = true
			}
			assert.Len(t, distinct, 4, "one tunnel per server")
			assert.Equal(t, 4, p.Servers())
			assert.Equal(t, 4, p.Tunnels())
			if held != nil {
				assert.Equal(t, 4, held(), "proxies online at the server")
			}
			for u := range distinct {
				assert.True(t, healthy(u), "GET %s/healthz through the tunnel", u)
			}

			require.NoError(t, p.Close())
			assert.Zero(t, p.Tunnels())
			for u := range distinct {
				pu, err := url.Parse(u)
				require.NoError(t, err)
				require.Eventually(t, func() bool { return !tunneltest.Listening(pu.Host) }, waitFor, tick, "the server still listens on %s after Close", pu.Host)
			}
			if held != nil {
				require.Eventually(t, func() bool { return held() == 0 }, waitFor, tick, "proxies online at the server after Close")
			}
		})
	}
}

func TestPoolCustomIsOneServer(t *testing.T) {
	port := tunneltest.FreePort(t, "127.0.0.1")
	public := "http://127.0.0.1:" + itoa(port)
	p := newPool(t, tunnel.Custom{URL: public, Port: port})
	slots := acquireAll(t, p, 128)
	urls := exposeAll(t, p, slots)

	assert.Equal(t, 1, p.Servers())
	for i, s := range slots {
		assert.Zero(t, s.Server)
		assert.Equal(t, public, urls[i])
	}
	assert.True(t, healthy(public), "the shared server answers at the configured URL")
	require.NoError(t, p.Close())
	assert.False(t, tunneltest.Listening("127.0.0.1:"+itoa(port)), "port %d after Close", port)
}

func TestPoolMonitorRecreatesDeadTunnel(t *testing.T) {
	for _, r := range remotes() {
		t.Run(r.name, func(t *testing.T) {
			tun, _, restart, held := r.start(t)
			p := newPool(t, tun)
			slots := acquireAll(t, p, 2)
			before := exposeAll(t, p, slots)[0]
			require.NoError(t, slots[0].CheckTunnel(context.Background()))

			restart() // the server side dies and comes back empty
			p.CheckTunnels(context.Background())

			assert.Equal(t, 1, p.Tunnels(), "the monitor re-created the tunnel")
			var te *tunnel.Error
			require.ErrorAs(t, slots[0].CheckTunnel(context.Background()), &te, "a rollout exposed before the loss lost its tunnel")
			assert.ErrorIs(t, te, tunnel.ErrDead)

			after, err := slots[0].Expose(context.Background())
			require.NoError(t, err)
			assert.True(t, healthy(after), "GET %s/healthz through the new tunnel", after)
			require.NoError(t, slots[0].CheckTunnel(context.Background()), "exposed again, the rollout has a working tunnel")
			if held != nil {
				assert.Equal(t, 1, held())
			}
			t.Logf("tunnel %s replaced by %s", before, after)
		})
	}
}

func TestPoolCheckTunnelNoticesLossBeforeMonitor(t *testing.T) {
	for _, r := range remotes() {
		t.Run(r.name, func(t *testing.T) {
			tun, kill, _, _ := r.start(t)
			p := newPool(t, tun)
			slots := acquireAll(t, p, 1)
			exposeAll(t, p, slots)

			kill()
			require.Eventually(t, func() bool {
				return slots[0].CheckTunnel(context.Background()) != nil
			}, waitFor, tick)
			assert.Error(t, slots[0].CheckTunnel(context.Background()), "still lost")
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestPoolStartMonitorRestoresOnItsOwn(t *testing.T) {
	r := remotes()[0] // frp
	tun, _, restart, held := r.start(t)
	p := newPool(t, tun)
	slots := acquireAll(t, p, 1)
	before := exposeAll(t, p, slots)[0]
	p.StartMonitor(20 * time.Millisecond)

	restart()
	// Only the monitor touches the pool; the fresh frps holds a proxy only
	// once the monitor has re-created the tunnel.
	require.Eventually(t, func() bool { return held() == 1 && p.Tunnels() == 1 }, waitFor, tick, "the monitor re-creates the tunnel")
	assert.ErrorIs(t, slots[0].CheckTunnel(context.Background()), tunnel.ErrDead, "the rollout exposed before the loss lost its tunnel")
	after, err := slots[0].Expose(context.Background())
	require.NoError(t, err)
	assert.NotEqual(t, before, after)
	assert.True(t, healthy(after))
}
