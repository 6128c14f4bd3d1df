package interception_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/tunnel"
)

// countingTunnel is tunnel.Local that counts exposures and closes, and can be
// made to fail or to hold creations until released.
type countingTunnel struct {
	tunnel.Local
	exposed atomic.Int32
	closed  atomic.Int32
	fail    atomic.Bool
	hold    chan struct{} // when set, Expose waits for it to close
}

func (c *countingTunnel) Expose(ctx context.Context, host string, port int) (tunnel.Exposure, error) {
	c.exposed.Add(1)
	if c.hold != nil {
		<-c.hold
	}
	if c.fail.Load() {
		return nil, errors.New("tunnel down")
	}
	exp, err := c.Local.Expose(ctx, host, port)
	if err != nil {
		return nil, err
	}
	return &countedExposure{Exposure: exp, closed: &c.closed}, nil
}

type countedExposure struct {
	tunnel.Exposure
	closed *atomic.Int32
}

func (e *countedExposure) Close() error {
	e.closed.Add(1)
	return e.Exposure.Close()
}

func newPool(t *testing.T, tun tunnel.Tunnel) *interception.Pool {
	t.Helper()
	p := interception.NewPool(interception.Config{
		Multiplex: 32,
		Tunnel:    tun,
		Upstream:  noUpstream{},
	})
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// noUpstream fails every call; pool tests make none.
type noUpstream struct{}

func (noUpstream) Dialect() string { return dialects.NameChat }

func (noUpstream) Relay(context.Context, string, http.Header, dialects.Body) (*http.Response, int, error) {
	return nil, 0, errors.New("no upstream in this test")
}

func acquireAll(t *testing.T, p *interception.Pool, n int) []*interception.Registration {
	t.Helper()
	slots := make([]*interception.Registration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			slots[i], errs[i] = p.Acquire(context.Background(), interception.Rollout{Key: fmt.Sprintf("run/0/%d/0", i), Model: "m"})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return slots
}

func TestPoolAcquireGrowsByMultiplex(t *testing.T) {
	p := newPool(t, nil)
	slots := acquireAll(t, p, 128)

	assert.Equal(t, 4, p.Servers())
	perServer := map[int]int{}
	urls := map[int]string{}
	secrets := map[string]bool{}
	for _, s := range slots {
		perServer[s.Server]++
		if u, ok := urls[s.Server]; ok {
			assert.Equal(t, u, s.LocalURL, "slots of server %d disagree on its URL", s.Server)
		}
		urls[s.Server] = s.LocalURL
		assert.Len(t, s.Secret, 64)
		secrets[s.Secret] = true
	}
	assert.Equal(t, map[int]int{0: 32, 1: 32, 2: 32, 3: 32}, perServer)
	assert.Len(t, secrets, 128, "every secret is distinct")
	assert.Len(t, urls, 4)
}

func TestPoolAcquireIsIdempotent(t *testing.T) {
	p := newPool(t, nil)
	r := interception.Rollout{Key: "run/0/1/0", Model: "m"}
	first, err := p.Acquire(context.Background(), r)
	require.NoError(t, err)
	again, err := p.Acquire(context.Background(), r)
	require.NoError(t, err)
	assert.Same(t, first, again)
	assert.Equal(t, 1, p.Rollouts())
}

func TestPoolReleaseFreesSlot(t *testing.T) {
	p := newPool(t, nil)
	slots := acquireAll(t, p, 64)
	require.Equal(t, 2, p.Servers())

	var victim *interception.Registration
	for _, s := range slots {
		if s.Server == 0 {
			victim = s
			break
		}
	}
	turns, ok := victim.Finish()
	assert.True(t, ok)
	assert.Empty(t, turns, "no calls were made")
	victim.Release()
	assert.Equal(t, 63, p.Rollouts())
	victim.Release() // releasing twice does nothing
	assert.Equal(t, 63, p.Rollouts())
	turns, ok = victim.Finish()
	assert.False(t, ok)
	assert.Nil(t, turns, "a released rollout has no turns to read")

	s, err := p.Acquire(context.Background(), interception.Rollout{Key: "run/0/new/0", Model: "m"})
	require.NoError(t, err)
	assert.Equal(t, 0, s.Server, "the freed slot is reused")
	assert.Equal(t, 2, p.Servers())

	// The released secret no longer authenticates.
	req, err := http.NewRequest(http.MethodGet, victim.LocalURL+"/v1/models", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+victim.Secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestPoolFinishKeepsSlot: a finished rollout's secret stops working at
// once, while its slot stays held and its turns readable until Release.
func TestPoolFinishKeepsSlot(t *testing.T) {
	p := newPool(t, nil)
	slot, err := p.Acquire(context.Background(), interception.Rollout{Key: "run/0/1/0", Model: "m"})
	require.NoError(t, err)
	models := func() int {
		req, err := http.NewRequest(http.MethodGet, slot.LocalURL+"/v1/models", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+slot.Secret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, models())

	turns, ok := slot.Finish()
	require.True(t, ok)
	assert.Empty(t, turns)
	assert.Equal(t, http.StatusUnauthorized, models(), "the finished rollout's secret")
	assert.Equal(t, 1, p.Rollouts(), "the slot is held until Release")
	_, ok = slot.Turns()
	assert.True(t, ok, "the turns are readable until Release")

	slot.Release()
	_, ok = slot.Turns()
	assert.False(t, ok)
}

func TestPoolExposeOncePerServer(t *testing.T) {
	tun := &countingTunnel{hold: make(chan struct{})}
	p := newPool(t, tun)
	slots := acquireAll(t, p, 40) // two servers

	urls := make([]string, len(slots))
	errs := make([]error, len(slots))
	var wg sync.WaitGroup
	for i, s := range slots {
		wg.Go(func() { urls[i], errs[i] = s.Expose(context.Background()) })
	}
	close(tun.hold)
	wg.Wait()

	for i, s := range slots {
		require.NoError(t, errs[i])
		assert.Equal(t, s.LocalURL, urls[i], "the local tunnel exposes the loopback URL")
	}
	assert.Equal(t, int32(2), tun.exposed.Load(), "one tunnel per server")

	slots[0].Release()
	_, err := slots[0].Expose(context.Background())
	assert.ErrorIs(t, err, interception.ErrUnknownRollout, "a released rollout")
}

func TestPoolExposeFailureNotCached(t *testing.T) {
	tun := &countingTunnel{}
	tun.fail.Store(true)
	p := newPool(t, tun)
	s, err := p.Acquire(context.Background(), interception.Rollout{Key: "k", Model: "m"})
	require.NoError(t, err)

	_, err = s.Expose(context.Background())
	require.Error(t, err)
	tun.fail.Store(false)
	u, err := s.Expose(context.Background())
	require.NoError(t, err)
	assert.Equal(t, s.LocalURL, u)
	assert.Equal(t, int32(2), tun.exposed.Load())
}

func TestPoolClose(t *testing.T) {
	tun := &countingTunnel{}
	p := newPool(t, tun)
	slots := acquireAll(t, p, 33)
	for _, s := range slots {
		_, err := s.Expose(context.Background())
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())

	assert.Equal(t, int32(2), tun.closed.Load(), "every tunnel is closed")
	for _, s := range []*interception.Registration{slots[0], slots[32]} {
		u, err := url.Parse(s.LocalURL)
		require.NoError(t, err)
		conn, err := net.Dial("tcp", u.Host)
		if err == nil {
			_ = conn.Close()
		}
		assert.Error(t, err, "dial %s after Close", u.Host)
	}
	_, err := p.Acquire(context.Background(), interception.Rollout{Key: "late", Model: "m"})
	assert.ErrorIs(t, err, interception.ErrPoolClosed)
	assert.NoError(t, p.Close(), "closing twice")
}
