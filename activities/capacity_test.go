package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapacityBoundsItsUnits(t *testing.T) {
	c := NewCapacity(2)
	ctx := context.Background()
	a, err := c.Take(ctx, func() {})
	require.NoError(t, err)
	_, err = c.Take(ctx, func() {})
	require.NoError(t, err)

	full, cancel := context.WithCancel(ctx)
	waited := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Take(full, func() {
			select {
			case waited <- struct{}{}:
			default:
			}
		})
		errc <- err
	}()
	<-waited // a third Take waits for a unit: the worker is full
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	_, ok := c.TryTake()
	assert.False(t, ok, "none is free")

	a.Give()
	a.Give() // giving twice frees one unit
	give, ok := c.TryTake()
	require.True(t, ok, "the unit given back")
	_, ok = c.TryTake()
	assert.False(t, ok, "one unit was given back, not two")
	give()
	_, err = c.Take(ctx, func() {})
	require.NoError(t, err)
}

func TestUnitSweptOnlyWhenItNeverRan(t *testing.T) {
	c := NewCapacity(3)
	ctx := context.Background()
	idle, err := c.Take(ctx, func() {})
	require.NoError(t, err)
	running, err := c.Take(ctx, func() {})
	require.NoError(t, err)
	held, err := c.Take(ctx, func() {})
	require.NoError(t, err)
	assert.True(t, running.Running(), "a unit not given back is held")
	started := held.Hold()

	assert.False(t, idle.Sweep(time.Hour), "nothing is old enough")
	assert.False(t, running.Sweep(0), "a running rollout keeps its unit")
	assert.False(t, held.Sweep(0), "a holding Acquire keeps its unit")
	assert.True(t, idle.Sweep(0))
	assert.False(t, idle.Sweep(0), "a swept unit is given back once")
	assert.False(t, idle.Running(), "a swept unit is not held")

	held.Unhold()
	assert.True(t, held.Sweep(0), "held no more, it is swept")
	select {
	case <-started:
	default:
		t.Fatal("a unit given back ends its hold")
	}
	for range 2 {
		_, ok := c.TryTake()
		require.True(t, ok, "the swept units are free again")
	}
	_, ok := c.TryTake()
	assert.False(t, ok)
}
