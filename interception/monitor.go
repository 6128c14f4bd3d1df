package interception

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/evalflow/evalflow/tunnel"
)

// StartMonitor checks every tunnel end to end each interval (0 is
// DefaultHealthInterval) until Close, closing a dead one and creating it anew.
// Calling it again does nothing.
func (p *Pool) StartMonitor(interval time.Duration) {
	if interval <= 0 {
		interval = DefaultHealthInterval
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.monitored || p.closed {
		return
	}
	p.monitored = true
	p.every(interval, func() { p.CheckTunnels(p.ctx) })
}

// every calls f each interval, in a goroutine of its own, until Close.
func (p *Pool) every(interval time.Duration, f func()) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
}

// CheckTunnels checks every server's tunnel once, as the monitor does: a dead
// tunnel is closed and created anew, and one whose re-creation failed
// earlier is tried again.
func (p *Pool) CheckTunnels(ctx context.Context) {
	p.mu.Lock()
	servers := slices.Clone(p.servers)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for i, m := range servers {
		wg.Go(func() { p.checkMember(ctx, i, m) })
	}
	wg.Wait()
}

func (p *Pool) checkMember(ctx context.Context, idx int, m *member) {
	m.mu.Lock()
	exp, gen, wanted, busy := m.exposure, m.gen, m.wanted, m.pending != nil || m.closed
	m.mu.Unlock()
	switch {
	case busy:
		return
	case exp == nil && wanted:
		p.restore(idx, m)
		return
	case exp == nil:
		return
	}
	err := tunnel.Check(ctx, p.name, exp)
	if err != nil && !knownDead(exp) {
		// One slow probe is not a dead tunnel: a working one answers the next.
		err = tunnel.Check(ctx, p.name, exp)
	}
	if err == nil || ctx.Err() != nil {
		return
	}
	p.lost(idx, m, gen, err)
	p.restore(idx, m)
}

// knownDead reports whether an exposure says itself that it is dead.
func knownDead(e tunnel.Exposure) bool {
	w, ok := e.(tunnel.Watched)
	return ok && w.Err() != nil
}

// lost closes a dead exposure of generation gen, once.
func (p *Pool) lost(idx int, m *member, gen uint64, err error) {
	if old := m.drop(gen); old != nil {
		p.cfg.Logger.Warn("tunnel lost; re-creating it", "server", idx, "tunnel", p.name, "error", err)
		_ = old.Close()
	}
}

// restore creates a server's tunnel anew.
func (p *Pool) restore(idx int, m *member) {
	if _, _, err := m.expose(p.ctx, p.cfg.Tunnel); err != nil {
		if p.ctx.Err() == nil {
			p.cfg.Logger.Warn("re-create tunnel", "server", idx, "tunnel", p.name, "error", err)
		}
		return
	}
	p.cfg.Logger.Info("tunnel re-created", "server", idx, "tunnel", p.name)
}

// CheckTunnel tells whether the tunnel the rollout was given by Expose
// still works. It returns a *tunnel.Error when that tunnel died since (the
// monitor replaced it) or fails a check now; a tunnel failing now is
// closed and created anew in the background. A rollout never exposed, or
// released, returns nil.
func (r *Registration) CheckTunnel(ctx context.Context) error {
	gen, ok := r.exposure()
	if !ok {
		return nil
	}
	p, m := r.p, r.m
	m.mu.Lock()
	cur, exp := m.gen, m.exposure
	m.mu.Unlock()
	if cur != gen || exp == nil {
		return &tunnel.Error{Tunnel: p.name, Op: "health", Err: fmt.Errorf("%w: it was lost while the rollout ran", tunnel.ErrDead)}
	}
	err := tunnel.Check(ctx, p.name, exp)
	if err == nil {
		return nil
	}
	p.lost(r.Server, m, gen, err)
	p.mu.Lock()
	if !p.closed {
		p.bg.Add(1)
		go func() {
			defer p.bg.Done()
			p.restore(r.Server, m)
		}()
	}
	p.mu.Unlock()
	return err
}
