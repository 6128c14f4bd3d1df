package interception

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/tunnel"
)

// ErrPoolClosed is returned by a Pool after Close.
var ErrPoolClosed = errors.New("interception pool closed")

// Slot is a rollout's place on a server.
type Slot struct {
	Key string
	// Server is the index of the server in the pool.
	Server int
	// Secret authenticates the rollout's calls. Never log it.
	Secret string
	// LocalURL is the server's base URL on this host, without /v1.
	LocalURL string
}

// Pool hands out slots on interception servers, Multiplex rollouts to a
// server, starting servers as needed. Each server gets at most one tunnel.
type Pool struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	servers []*member
	slots   map[string]Slot
}

// member is a pooled server and its tunnel exposure, created on first use.
type member struct {
	srv *Server

	mu       sync.Mutex
	exposure tunnel.Exposure
	pending  chan struct{} // closed when an exposure attempt in flight ends
	closed   bool
}

// NewPool returns an empty pool; servers start on the first Acquire.
func NewPool(cfg Config) *Pool {
	return &Pool{cfg: cfg.withDefaults(), slots: make(map[string]Slot)}
}

// Acquire registers a rollout on a server with a free slot, starting a new
// server when all are full. Acquiring a key already registered returns its
// existing slot.
func (p *Pool) Acquire(ctx context.Context, r Rollout) (Slot, error) {
	if err := ctx.Err(); err != nil {
		return Slot{}, fmt.Errorf("acquire %s: %w", r.Key, err)
	}
	if r.Key == "" {
		return Slot{}, errors.New("acquire: empty rollout key")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Slot{}, fmt.Errorf("acquire %s: %w", r.Key, ErrPoolClosed)
	}
	if s, ok := p.slots[r.Key]; ok {
		return s, nil
	}
	idx := -1
	for i, m := range p.servers {
		if m.srv.Len() < p.cfg.Multiplex {
			idx = i
			break
		}
	}
	if idx < 0 {
		srv, err := Listen(p.cfg)
		if err != nil {
			return Slot{}, fmt.Errorf("acquire %s: %w", r.Key, err)
		}
		p.servers = append(p.servers, &member{srv: srv})
		idx = len(p.servers) - 1
		p.cfg.Logger.Info("interception server started", "server", idx, "url", srv.LocalURL())
	}
	srv := p.servers[idx].srv
	secret, err := srv.Register(r)
	if err != nil {
		return Slot{}, fmt.Errorf("acquire %s: %w", r.Key, err)
	}
	s := Slot{Key: r.Key, Server: idx, Secret: secret, LocalURL: srv.LocalURL()}
	p.slots[r.Key] = s
	return s, nil
}

// Slot returns a registered rollout's slot.
func (p *Pool) Slot(key string) (Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.slots[key]
	return s, ok
}

// Turns returns the turns recorded so far for a registered rollout.
func (p *Pool) Turns(key string) ([]trace.Turn, bool) {
	p.mu.Lock()
	s, ok := p.slots[key]
	var m *member
	if ok {
		m = p.servers[s.Server]
	}
	p.mu.Unlock()
	if !ok {
		return nil, false
	}
	return m.srv.Turns(key)
}

// Expose returns the base URL (without /v1) of the rollout's server through
// the tunnel. The tunnel is created once per server; concurrent callers wait
// for one creation. A failed creation is not cached, so a later call retries.
func (p *Pool) Expose(ctx context.Context, key string) (string, error) {
	p.mu.Lock()
	s, ok := p.slots[key]
	var m *member
	if ok {
		m = p.servers[s.Server]
	}
	closed := p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return "", fmt.Errorf("expose %s: %w", key, ErrPoolClosed)
	case !ok:
		return "", fmt.Errorf("expose %s: %w", key, ErrUnknownRollout)
	}
	u, err := m.expose(ctx, p.cfg.Tunnel)
	if err != nil {
		return "", fmt.Errorf("expose %s: %w", key, err)
	}
	return u, nil
}

func (m *member) expose(ctx context.Context, t tunnel.Tunnel) (string, error) {
	for {
		m.mu.Lock()
		switch {
		case m.closed:
			m.mu.Unlock()
			return "", ErrPoolClosed
		case m.exposure != nil:
			u := m.exposure.URL()
			m.mu.Unlock()
			return u, nil
		case m.pending != nil:
			wait := m.pending
			m.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		done := make(chan struct{})
		m.pending = done
		m.mu.Unlock()

		exp, err := t.Expose(ctx, m.srv.host, m.srv.port)

		m.mu.Lock()
		m.pending = nil
		close(done)
		if err != nil {
			m.mu.Unlock()
			return "", err
		}
		if m.closed { // the pool closed while the tunnel came up
			m.mu.Unlock()
			_ = exp.Close()
			return "", ErrPoolClosed
		}
		m.exposure = exp
		m.mu.Unlock()
		return exp.URL(), nil
	}
}

// close closes the member's exposure, then its server.
func (m *member) close() error {
	m.mu.Lock()
	m.closed = true
	exp := m.exposure
	m.exposure = nil
	m.mu.Unlock()
	var errs []error
	if exp != nil {
		if err := exp.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close tunnel: %w", err))
		}
	}
	if err := m.srv.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Release unregisters a rollout and returns its recorded turns; its slot is
// free again and its secret stops working. An unknown key returns nil.
func (p *Pool) Release(key string) []trace.Turn {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.slots[key]
	if !ok {
		return nil
	}
	delete(p.slots, key)
	turns, _ := p.servers[s.Server].srv.Unregister(key)
	return turns
}

// Servers is how many servers the pool has started.
func (p *Pool) Servers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.servers)
}

// Close closes every tunnel and server. The pool cannot be used after.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	servers := p.servers
	p.mu.Unlock()
	var errs []error
	for _, m := range servers {
		if err := m.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
