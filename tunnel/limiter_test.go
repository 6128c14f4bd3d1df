package tunnel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel"
)

func TestLimiterBurstThenBlocks(t *testing.T) {
	l := tunnel.NewLimiter(3)
	for i := range 3 {
		require.NoError(t, l.Wait(context.Background()), "creation %d within the burst", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Error(t, l.Wait(ctx), "a fourth creation waits for the refill")

	l.SetRate(0)
	for range 100 {
		require.NoError(t, l.Wait(context.Background()), "unlimited")
	}
}

func TestFRPRetriesThroughLimiter(t *testing.T) {
	// An frps that does not exist: every attempt fails and takes a token.
	lim := tunnel.NewLimiter(2)
	f := &tunnel.FRP{ServerAddr: "127.0.0.1", ServerPort: 1, Token: "t", Limiter: lim, Retry: tunnel.Retry{Attempts: 2}}
	_, err := f.Expose(context.Background(), "127.0.0.1", 1)
	require.Error(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Error(t, lim.Wait(ctx), "two attempts used the limiter's two tokens")
}
