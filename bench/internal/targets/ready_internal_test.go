package targets

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// Ended rollouts are read during the load once they carried ReadyBytes of
// requests, not only when the target settles.
func TestEndedRolloutsAreReadDuringTheLoad(t *testing.T) {
	base, stop, err := upstream.Listen(upstream.New(upstream.Config{BodyBytes: 200}), false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = stop() })
	up, err := Upstream(Chat, base, false)
	require.NoError(t, err)
	i, err := NewInterception(up)
	require.NoError(t, err)
	t.Cleanup(func() { _ = i.Close() })
	body := Body(Chat, 200, false)
	i.Rollouts, i.Rotate, i.ReadyBytes = 2, 3, 3*len(body)
	c := loadgen.NewClient(2)
	tg := i.Target("relay", Chat, body)
	const calls = 40
	for range calls {
		_, err := c.Do(context.Background(), tg)
		require.NoError(t, err)
	}
	i.drops.Wait() // the reads started during the load, without settling
	i.mu.Lock()
	waiting := len(i.ready)
	i.mu.Unlock()
	// At most the two rollouts in flight (three turns each) and the ready
	// ones below ReadyBytes (under three turns) are not read yet.
	assert.GreaterOrEqual(t, i.Parsed(), calls-2*3-2)
	assert.Less(t, waiting, 3)
	turns, errored := i.Turns()
	assert.Equal(t, calls, turns)
	assert.Zero(t, errored)
}
