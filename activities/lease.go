package activities

import (
	"sync"
	"time"
)

// lease is one rollout attempt's hold on this worker, from Acquire to the
// end of its last step: the capacity unit and the interception
// registration (with its tunnel) that Acquire took, and, once Run hands
// them over, the workspace (with its sandbox) and what the Run saw, until
// Verify. Acquire opens it, Run and Verify find it by the rollout's key,
// and Close releases all it holds, once, on every path: a Run that ends
// the rollout, a Verify, a hold given up, a Verify that never comes, a
// worker that stops.
type lease struct {
	a   *Activities
	key string

	mu      sync.Mutex
	pending *pendingVerify // the workspace waiting for Verify
	closed  bool
}

// Close releases everything the lease holds: the workspace and its
// sandbox, the interception registration, the capacity unit. Later calls
// do nothing. A nil lease (a key this worker never acquired) releases
// nothing.
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
	p := l.pending
	l.pending = nil
	l.mu.Unlock()
	if p != nil {
		p.expire.Stop()
		l.a.removeWorkspace(l.key, p.ws)
	}
	l.a.Pool.Release(l.key)
	l.a.Capacity.Give(l.key)
	l.a.leases.forget(l)
}

// handOver keeps p for the rollout's Verify; when Verify has not taken it
// within, plus the worker's grace, the lease is closed (the workflow moved
// on).
func (l *lease) handOver(p pendingVerify, within time.Duration) {
	grace := l.a.VerifyGrace
	if grace <= 0 {
		grace = defaultVerifyGrace
	}
	pp := &p
	pp.expire = time.AfterFunc(within+grace, func() {
		if l.takePending() == pp {
			l.a.logger().Warn("a rollout's Verify never started; its workspace is removed", "key", l.key)
			l.a.removeWorkspace(l.key, pp.ws)
			l.Close()
		}
	})
	l.mu.Lock()
	old := l.pending
	l.pending = pp
	l.mu.Unlock()
	if old != nil { // an earlier attempt's, never verified
		old.expire.Stop()
		l.a.removeWorkspace(l.key, old.ws)
	}
}

// takePending removes and returns what waits for Verify, or nil.
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
	}
	return p
}

// leases are a worker's open leases, by rollout key.
type leases struct {
	mu sync.Mutex
	m  map[string]*lease
}

// open returns key's lease, opening one when there is none: a retried
// Acquire of the same key holds the same lease.
func (a *Activities) openLease(key string) *lease {
	ls := &a.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.m[key]; ok {
		return l
	}
	if ls.m == nil {
		ls.m = map[string]*lease{}
	}
	l := &lease{a: a, key: key}
	ls.m[key] = l
	return l
}

// lease is key's open lease, or nil.
func (a *Activities) lease(key string) *lease {
	ls := &a.leases
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.m[key]
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
	ls := &a.leases
	ls.mu.Lock()
	open := make([]*lease, 0, len(ls.m))
	for _, l := range ls.m {
		open = append(open, l)
	}
	ls.mu.Unlock()
	for _, l := range open {
		l.Close()
	}
}

// Sweep closes the leases of a's rollouts that took a capacity unit more
// than age ago and never started running (their workflow moved on), and
// returns their keys.
func Sweep(a *Activities, age time.Duration) []string {
	keys := a.Capacity.Sweep(age)
	for _, k := range keys {
		if l := a.lease(k); l != nil {
			l.Close()
		} else {
			a.Pool.Release(k)
		}
	}
	return keys
}
