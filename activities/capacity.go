package activities

import (
	"context"
	"sync"
	"time"
)

// Capacity bounds how many rollouts one worker holds. A rollout's lease
// takes a Unit in Acquire and gives it back when it closes.
type Capacity struct {
	free chan struct{}
}

// Unit is one rollout's share of a Capacity, from Take to Give.
type Unit struct {
	c     *Capacity
	since time.Time

	mu      sync.Mutex
	given   bool
	running bool
	// holding is set while a holding Acquire waits for the rollout's Run
	// (Hold): the unit is in use, whatever its age.
	holding bool
	// started is closed when the unit starts running or is given back.
	started chan struct{}
}

// NewCapacity allows n rollouts at once.
func NewCapacity(n int) *Capacity {
	c := &Capacity{free: make(chan struct{}, n)}
	for range n {
		c.free <- struct{}{}
	}
	return c
}

// Take waits for a unit, calling wait every second while it waits.
func (c *Capacity) Take(ctx context.Context, wait func()) (*Unit, error) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.free:
			return c.unit(), nil
		case <-t.C:
			wait()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryTake takes a unit at once and returns the function that gives it
// back, or reports that none is free, without waiting: for the rollout
// gateway's registrations (gateway.SlotCounter), whose trainer is told the
// worker is full.
func (c *Capacity) TryTake() (give func(), ok bool) {
	select {
	case <-c.free:
		u := c.unit()
		u.Running()
		return u.Give, true
	default:
		return nil, false
	}
}

func (c *Capacity) unit() *Unit {
	return &Unit{c: c, since: time.Now(), started: make(chan struct{})}
}

// end marks u as started or gone: a holding Acquire waiting on it returns.
// Called with u.mu held.
func (u *Unit) end() {
	select {
	case <-u.started:
	default:
		close(u.started)
	}
}

// Give gives the unit back to its Capacity. Later calls do nothing.
func (u *Unit) Give() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.give()
}

// give gives u back, once. Called with u.mu held.
func (u *Unit) give() {
	if u.given {
		return
	}
	u.given = true
	u.end()
	u.c.free <- struct{}{}
}

// Running marks the unit as in use by a running rollout, so Sweep keeps
// it, and reports whether it is still held (not given back).
func (u *Unit) Running() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.running = true
	u.end()
	return !u.given
}

// Hold marks the unit as held by a live Acquire until the returned channel
// is closed: when the rollout's Run starts or the unit is given back.
// Sweep keeps a held unit.
func (u *Unit) Hold() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holding = true
	return u.started
}

// Unhold says the Acquire holding the unit has stopped waiting.
func (u *Unit) Unhold() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holding = false
}

// Sweep gives the unit back when it was taken more than age ago by a
// rollout that never started running (its workflow moved on) and no
// Acquire holds it, and reports whether it did.
func (u *Unit) Sweep(age time.Duration) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.given || u.running || u.holding || time.Since(u.since) <= age {
		return false
	}
	u.give()
	return true
}
