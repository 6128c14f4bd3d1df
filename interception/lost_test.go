package interception_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The monitor's finding that a tunnel died reaches every rollout exposed on
// it through Lost, and only those.
func TestPoolLostSaysWhenTheMonitorFindsATunnelDead(t *testing.T) {
	for _, r := range remotes() {
		t.Run(r.name, func(t *testing.T) {
			tun, kill, _, _ := r.start(t)
			p := newPool(t, tun)
			slots := acquireAll(t, p, 3)
			exposeAll(t, p, slots[:2])

			lost := slots[0].Lost()
			require.NotNil(t, lost)
			assert.False(t, closed(lost), "a working tunnel is not lost")
			assert.Nil(t, slots[2].Lost(), "a rollout never exposed has no tunnel to lose")

			p.CheckTunnels(context.Background())
			assert.False(t, closed(lost), "a check of a working tunnel loses nothing")

			kill()
			p.CheckTunnels(context.Background())
			<-lost // closed by the check that found the tunnel dead
			assert.True(t, closed(slots[1].Lost()), "every rollout on the tunnel lost it")
			assert.True(t, closed(slots[0].Lost()), "asked again, still lost")
			assert.ErrorIs(t, slots[0].CheckTunnel(context.Background()), tunnel.ErrDead)
			slots[1].Release()
			assert.Nil(t, slots[1].Lost(), "a released rollout has no tunnel to lose")
			assert.NoError(t, slots[1].CheckTunnel(context.Background()), "nor to check")
		})
	}
}

func TestPoolLostAfterExposingAgain(t *testing.T) {
	r := remotes()[0] // frp
	tun, _, restart, _ := r.start(t)
	p := newPool(t, tun)
	slots := acquireAll(t, p, 1)
	exposeAll(t, p, slots)
	first := slots[0].Lost()

	restart()
	p.CheckTunnels(context.Background()) // finds it dead and re-creates it
	<-first
	exposeAll(t, p, slots)
	again := slots[0].Lost()
	require.NotNil(t, again)
	assert.False(t, closed(again), "exposed again, the rollout has a live tunnel")
}

func TestPoolLostIsNilOnLoopback(t *testing.T) {
	p := newPool(t, tunnel.Local{})
	slots := acquireAll(t, p, 1)
	exposeAll(t, p, slots)
	assert.Nil(t, slots[0].Lost(), "a loopback server has no tunnel to lose")
}
