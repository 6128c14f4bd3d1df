package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapacityBoundsAndIsIdempotentPerKey(t *testing.T) {
	c := NewCapacity(2)
	ctx := context.Background()
	require.NoError(t, c.Take(ctx, "a", func() {}))
	require.NoError(t, c.Take(ctx, "a", func() {}), "a retried Acquire of the same key holds one unit")
	require.NoError(t, c.Take(ctx, "b", func() {}))

	full, cancel := context.WithCancel(ctx)
	waited := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- c.Take(full, "c", func() {
			select {
			case waited <- struct{}{}:
			default:
			}
		})
	}()
	<-waited // "c" is waiting for a unit: the worker is full
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	c.Give("a")
	c.Give("a") // giving twice frees one unit
	require.NoError(t, c.Take(ctx, "c", func() {}))
	ctx2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	assert.Error(t, c.Take(ctx2, "d", func() {}), "b and c hold both units")
}

func TestCapacitySweepsOnlyRolloutsThatNeverRan(t *testing.T) {
	c := NewCapacity(3)
	ctx := context.Background()
	for _, k := range []string{"idle", "running"} {
		require.NoError(t, c.Take(ctx, k, func() {}))
	}
	c.Running("running")
	assert.Empty(t, c.Sweep(time.Hour), "nothing is old enough")
	assert.Equal(t, []string{"idle"}, c.Sweep(0))
	assert.Empty(t, c.Sweep(0), "a swept unit is given back once")
	require.NoError(t, c.Take(ctx, "x", func() {}))
	require.NoError(t, c.Take(ctx, "y", func() {}), "the swept unit is free again")
}
