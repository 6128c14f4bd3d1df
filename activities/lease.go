package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
)

// lease is one rollout attempt's hold on this worker, from Acquire to the
// end of its last step: the capacity unit and the interception
// registration (with its tunnel) that Acquire took, and the workspace
// (with its sandbox) of its Run and what the Run saw, until Verify.
// Acquire opens it, Run and Verify find it by the rollout's key, and Close
// releases all it holds, once, on every path: a Run that ends the
// rollout, a Verify, a hold given up, a Verify that never comes, a worker
// that stops. A nil lease (a key this worker does not hold) holds nothing.
type lease struct {
	a    *Activities
	key  string
	unit *Unit

	mu      sync.Mutex
	reg     *interception.Registration
	ws      *harness.Workspace
	pending *pendingVerify // what waits for Verify
	closed  bool
}

// errLeaseClosed is an Acquire's whose lease was closed under it.
var errLeaseClosed = errors.New("the rollout's slot was released while it was acquired")

// Close releases everything the lease holds: the workspace and its
// sandbox, the interception registration, the capacity unit. Later calls
// do nothing.
func (l *lease) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	reg, ws, p := l.reg, l.ws, l.pending
	l.reg, l.ws, l.pending = nil, nil, nil
	l.mu.Unlock()
	if p != nil {
		p.expire.Stop()
	}
	if ws != nil {
		l.a.removeWorkspace(l.key, ws)
	}
	if reg != nil {
		reg.Release()
	}
	l.unit.Give()
	l.a.leases.forget(l)
}

// register gives the lease the registration pool hands out for r, or
// returns the one it holds (a retried Acquire). A lease that closed takes
// none.
func (l *lease) register(ctx context.Context, pool *interception.Pool, r interception.Rollout) (*interception.Registration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, errLeaseClosed
	case l.reg != nil:
		return l.reg, nil
	}
	reg, err := pool.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	l.reg = reg
	return reg, nil
}

// registration is the lease's registration, nil once released.
func (l *lease) registration() *interception.Registration {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reg
}

// start begins the lease's Run: its unit counts as running (a holding
// Acquire returns), and what an earlier Run left for a Verify that never
// came is removed. It returns the registration the Run calls the model
// through, or nil when the lease holds none (the slot is not here).
func (l *lease) start() *interception.Registration {
	if l == nil {
		return nil
	}
	held := l.unit.Running()
	l.mu.Lock()
	ws, p := l.ws, l.pending
	l.ws, l.pending = nil, nil
	reg := l.reg
	l.mu.Unlock()
	if p != nil {
		p.expire.Stop()
	}
	if ws != nil {
		l.a.removeWorkspace(l.key, ws)
	}
	if !held {
		return nil
	}
	return reg
}

// keep gives the lease the workspace of its Run, to remove when it
// closes; one that closed already removes it now.
func (l *lease) keep(ws *harness.Workspace) {
	if ws == nil {
		return
	}
	l.mu.Lock()
	closed := l.closed
	if !closed {
		l.ws = ws
	}
	l.mu.Unlock()
	if closed {
		l.a.removeWorkspace(l.key, ws)
	}
}

// endRun ends the lease's Run: the model calls end with the harness, so
// the registration is released; the rest goes with the lease, now, unless
// the Run handed it over to Verify.
func (l *lease) endRun() {
	if l == nil {
		return
	}
	l.mu.Lock()
	reg, verifying := l.reg, l.pending != nil
	l.reg = nil
	l.mu.Unlock()
	if reg != nil {
		reg.Release()
	}
	if !verifying {
		l.Close()
	}
}

// handOver keeps what the Run saw (and its workspace) for the rollout's
// Verify; when Verify has not taken it within, plus the worker's grace,
// the lease is closed (the workflow moved on).
func (l *lease) handOver(p pendingVerify, within time.Duration) {
	grace := l.a.VerifyGrace
	if grace <= 0 {
		grace = defaultVerifyGrace
	}
	pp := &p
	pp.expire = time.AfterFunc(within+grace, func() {
		if l.takePending() == pp {
			l.a.logger().Warn("a rollout's Verify never started; its workspace is removed", "key", l.key)
			l.Close()
		}
	})
	l.mu.Lock()
	l.pending = pp
	l.mu.Unlock()
}

// takePending removes and returns what waits for Verify, with the
// workspace (which the lease still holds, until it closes), or nil.
func (l *lease) takePending() *pendingVerify {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending
	l.pending = nil
	if p != nil {
		p.expire.Stop()
		p.ws = l.ws
	}
	return p
}

// leases are a worker's open leases, by rollout key.
type leases struct {
	mu sync.Mutex
	m  map[string]*lease
}

// openLease returns key's open lease: a retried Acquire of the same key
// holds the same lease. Without one, it takes a capacity unit, calling
// wait every second while it waits, and opens a lease holding it.
func (a *Activities) openLease(ctx context.Context, key string, wait func()) (*lease, error) {
	if l := a.lease(key); l != nil {
		return l, nil
	}
	u, err := a.Capacity.Take(ctx, wait)
	if err != nil {
		return nil, err
	}
	ls := &a.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.m[key]; ok { // a concurrent Acquire of the same key won
		u.Give()
		return l, nil
	}
	if ls.m == nil {
		ls.m = map[string]*lease{}
	}
	l := &lease{a: a, key: key, unit: u}
	ls.m[key] = l
	return l, nil
}

// lease is key's open lease, or nil.
func (a *Activities) lease(key string) *lease {
	ls := &a.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[key]
}

// open is every open lease.
func (ls *leases) open() []*lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	open := make([]*lease, 0, len(ls.m))
	for _, l := range ls.m {
		open = append(open, l)
	}
	return open
}

// forget drops l from the open leases, unless another took its key.
func (ls *leases) forget(l *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m[l.key] == l {
		delete(ls.m, l.key)
	}
}

// CloseLeases closes every open lease of a: a stopping worker's
// workspaces and sandboxes waiting for a Verify that will not come here
// are removed, its registrations and capacity released. Call it once no
// activity runs. (A function, not a method: every method of Activities is
// an activity.)
func CloseLeases(a *Activities) {
	for _, l := range a.leases.open() {
		l.Close()
	}
}

// Sweep closes the leases of a's rollouts that took a capacity unit more
// than age ago and never started running (their workflow moved on), and
// returns their keys.
func Sweep(a *Activities, age time.Duration) []string {
	var keys []string
	for _, l := range a.leases.open() {
		if l.unit.Sweep(age) {
			l.Close()
			keys = append(keys, l.key)
		}
	}
	return keys
}
