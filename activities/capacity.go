package activities

import (
	"context"
	"sync"
	"time"
)

// Capacity bounds how many rollouts one worker holds. A rollout takes a unit
// in Acquire and gives it back when Run ends or the slot is released; a key
// taken twice (a retried Acquire) holds one unit.
type Capacity struct {
	free chan struct{}
	mu   sync.Mutex
	held map[string]hold
}

type hold struct {
	since   time.Time
	running bool
	// holding is set while a holding Acquire waits for the rollout's Run
	// (Hold): the unit is in use, whatever its age.
	holding bool
	// started is closed when the unit starts running or is given back.
	started chan struct{}
}

// end marks h as started or gone: a holding Acquire waiting on it returns.
func (h *hold) end() {
	select {
	case <-h.started:
	default:
		close(h.started)
	}
}

// NewCapacity allows n rollouts at once.
func NewCapacity(n int) *Capacity {
	c := &Capacity{free: make(chan struct{}, n), held: make(map[string]hold)}
	for range n {
		c.free <- struct{}{}
	}
	return c
}

// Take waits for a unit for key, calling wait every second while it waits.
func (c *Capacity) Take(ctx context.Context, key string, wait func()) error {
	c.mu.Lock()
	_, ok := c.held[key]
	c.mu.Unlock()
	if ok {
		return nil
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.free:
			c.mu.Lock()
			defer c.mu.Unlock()
			if _, ok := c.held[key]; ok { // a concurrent Take of the same key won
				c.free <- struct{}{}
				return nil
			}
			c.held[key] = hold{since: time.Now(), started: make(chan struct{})}
			return nil
		case <-t.C:
			wait()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Give returns key's unit, if it holds one.
func (c *Capacity) Give(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.held[key]; ok {
		h.end()
		delete(c.held, key)
		c.free <- struct{}{}
	}
}

// Running marks key's unit as in use by a running rollout, so Sweep keeps it.
func (c *Capacity) Running(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.held[key]; ok {
		h.running = true
		h.end()
		c.held[key] = h
	}
}

// Hold marks key's unit as held by a live Acquire until the returned channel
// is closed: when the rollout's Run starts or the unit is given back. Sweep
// keeps a held unit. A key without a unit gets a closed channel.
func (c *Capacity) Hold(key string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[key]
	if !ok {
		done := make(chan struct{})
		close(done)
		return done
	}
	h.holding = true
	c.held[key] = h
	return h.started
}

// Unhold says the Acquire holding key's unit has stopped waiting.
func (c *Capacity) Unhold(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.held[key]; ok {
		h.holding = false
		c.held[key] = h
	}
}

// Sweep gives back the units taken more than age ago by rollouts that never
// started running (their workflow moved on) and returns their keys.
func (c *Capacity) Sweep(age time.Duration) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k, h := range c.held {
		if !h.running && !h.holding && time.Since(h.since) > age {
			h.end()
			keys = append(keys, k)
			delete(c.held, k)
			c.free <- struct{}{}
		}
	}
	return keys
}

// TryTake takes a unit for key at once, or reports that none is free,
// without waiting: for the rollout gateway's registrations
// (gateway.SlotCounter), whose trainer is told the worker is full.
// The unit counts as running, so Sweep keeps it until Give.
func (c *Capacity) TryTake(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.held[key]; ok {
		return false
	}
	select {
	case <-c.free:
		h := hold{since: time.Now(), running: true, started: make(chan struct{})}
		h.end()
		c.held[key] = h
		return true
	default:
		return false
	}
}
