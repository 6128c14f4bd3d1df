package interception

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/tunnel"
)

// ErrPoolClosed is returned by a Pool after Close.
var ErrPoolClosed = errors.New("interception pool closed")

// DefaultHealthInterval is how often the monitor checks every tunnel.
const DefaultHealthInterval = 30 * time.Second

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

// Pool hands out registrations on interception servers, Multiplex
// rollouts to a server, starting servers as needed. Each server gets at
// most one tunnel, created on the first Expose and re-created by the
// health monitor when it dies. A Fixed tunnel (custom) gets a single
// server shared by every rollout.
type Pool struct {
	cfg    Config
	name   string // the tunnel's kind, for errors and logs
	single bool   // one server for every rollout: the tunnel binds a fixed port

	ctx    context.Context // ends with Close; bounds tunnel creations
	cancel context.CancelFunc
	bg     sync.WaitGroup // monitor and tunnel restorations

	mu        sync.Mutex
	closed    bool
	monitored bool
	servers   []*member
	// regs are the registrations held, by rollout key: a retried Acquire
	// finds its own, and the gateway its rollouts (gatewaypool.go).
	regs map[string]*Registration

	gw *gateway.Gateway // the rollout gateway over the pool (gatewaypool.go)
}

// member is a pooled server and its tunnel exposure, created on first use.
type member struct {
	srv *Server

	mu       sync.Mutex
	exposure tunnel.Exposure
	// gen counts the exposures that died; a rollout exposed at an older
	// generation lost its tunnel.
	gen    uint64
	wanted bool // exposed once, so a dead tunnel is re-created
	// dead is closed when the exposure of generation gen is found dead.
	dead    chan struct{}
	pending chan struct{} // closed when an exposure attempt in flight ends
	closed  bool
}

// NewPool returns an empty pool; servers start on the first Acquire.
func NewPool(cfg Config) *Pool {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	_, single := cfg.Tunnel.(tunnel.Fixed)
	p := &Pool{
		name: tunnelName(cfg.Tunnel), single: single, ctx: ctx, cancel: cancel,
		regs: make(map[string]*Registration),
	}
	p.gw = gateway.New(gatewayPool{p}, gateway.Config{Token: cfg.GatewayToken, TTL: cfg.GatewayTTL,
		Slots: cfg.GatewaySlots, ModelPaths: modelPaths(), Now: cfg.Now, Logger: cfg.Logger})
	if cfg.GatewayToken != "" {
		cfg.gateway = p.gw.Handler()
	}
	p.cfg = cfg
	return p
}

// bindPort is the port servers listen on: the Fixed tunnel's, or any.
func bindPort(t tunnel.Tunnel) int {
	if f, ok := t.(tunnel.Fixed); ok {
		return f.BindPort()
	}
	return 0
}

func tunnelName(t tunnel.Tunnel) string {
	switch t.(type) {
	case tunnel.Local, *tunnel.Local:
		return "local"
	case tunnel.Custom, *tunnel.Custom:
		return "custom"
	case *tunnel.FRP:
		return "frp"
	case *tunnel.SSH:
		return "ssh"
	default:
		return fmt.Sprintf("%T", t)
	}
}

// Registration is a rollout's place on a pool's server, from Acquire to
// Release: its slot, the tunnel Expose gave it, and what its calls left.
// After Release it holds nothing: its methods answer as for a rollout that
// is not registered.
type Registration struct {
	Slot

	p   *Pool
	m   *member
	key string // Slot.Key, which a caller may overwrite

	// Under p.mu.
	released bool
	exposed  bool
	gen      uint64 // the tunnel generation Expose gave it
}

// Acquire registers a rollout on a server with a free slot, starting a new
// server when all are full. Acquiring a key already registered returns its
// registration.
func (p *Pool) Acquire(ctx context.Context, r Rollout) (*Registration, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", r.Key, err)
	}
	if r.Key == "" {
		return nil, errors.New("acquire: empty rollout key")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("acquire %s: %w", r.Key, ErrPoolClosed)
	}
	if reg, ok := p.regs[r.Key]; ok {
		return reg, nil
	}
	idx := -1
	for i, m := range p.servers {
		if p.single || m.srv.Len() < p.cfg.Multiplex {
			idx = i
			break
		}
	}
	if idx < 0 {
		srv, err := Listen(p.cfg)
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", r.Key, err)
		}
		p.servers = append(p.servers, &member{srv: srv})
		idx = len(p.servers) - 1
		p.cfg.Logger.Info("interception server started", "server", idx, "url", srv.LocalURL())
	}
	m := p.servers[idx]
	secret, err := m.srv.Register(r)
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", r.Key, err)
	}
	reg := &Registration{Slot: Slot{Key: r.Key, Server: idx, Secret: secret, LocalURL: m.srv.LocalURL()}, p: p, m: m, key: r.Key}
	p.regs[r.Key] = reg
	return reg, nil
}

// registered returns the registration of key, if it is held.
func (p *Pool) registered(key string) (*Registration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	reg, ok := p.regs[key]
	return reg, ok
}

// Rollouts is how many rollouts hold a registration.
func (p *Pool) Rollouts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.regs)
}

// Loopback reports whether the pool's servers are reached on this host as
// they are (a local tunnel): Expose then only names the loopback URL.
func (p *Pool) Loopback() bool { return p.name == "local" }

// live reports whether r is still held: not released.
func (r *Registration) live() bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return !r.released
}

// Turns returns the turns recorded so far for the rollout.
func (r *Registration) Turns() ([]trace.Turn, bool) {
	if !r.live() {
		return nil, false
	}
	return r.m.srv.Turns(r.key)
}

// Expose returns the base URL (without /v1) of the rollout's server through
// the tunnel. The tunnel is created once per server; concurrent callers wait
// for one creation. A failed creation is not cached, so a later call retries.
// Tunnel failures are *tunnel.Error values.
func (r *Registration) Expose(ctx context.Context) (string, error) {
	p := r.p
	p.mu.Lock()
	closed, released := p.closed, r.released
	p.mu.Unlock()
	switch {
	case closed:
		return "", fmt.Errorf("expose %s: %w", r.key, ErrPoolClosed)
	case released:
		return "", fmt.Errorf("expose %s: %w", r.key, ErrUnknownRollout)
	}
	u, gen, err := r.m.expose(ctx, p.cfg.Tunnel)
	if err != nil {
		return "", fmt.Errorf("expose %s: %w", r.key, err)
	}
	p.mu.Lock()
	if !r.released {
		r.exposed, r.gen = true, gen
	}
	p.mu.Unlock()
	return u, nil
}

func (m *member) expose(ctx context.Context, t tunnel.Tunnel) (string, uint64, error) {
	for {
		m.mu.Lock()
		switch {
		case m.closed:
			m.mu.Unlock()
			return "", 0, ErrPoolClosed
		case m.exposure != nil:
			u, gen := m.exposure.URL(), m.gen
			m.mu.Unlock()
			return u, gen, nil
		case m.pending != nil:
			wait := m.pending
			m.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", 0, ctx.Err()
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
			return "", 0, err
		}
		if m.closed { // the pool closed while the tunnel came up
			m.mu.Unlock()
			_ = exp.Close()
			return "", 0, ErrPoolClosed
		}
		m.exposure, m.wanted, m.dead = exp, true, make(chan struct{})
		u, gen := exp.URL(), m.gen
		m.mu.Unlock()
		return u, gen, nil
	}
}

// drop detaches the exposure of generation gen, which was found dead, and
// returns it for closing; nil when it was already replaced.
func (m *member) drop(gen uint64) tunnel.Exposure {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen || m.exposure == nil {
		return nil
	}
	exp := m.exposure
	m.exposure = nil
	m.gen++
	close(m.dead)
	m.dead = nil
	return exp
}

// closedChan is a channel that is closed: a tunnel already lost.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// exposure is the tunnel generation Expose gave r, and whether it gave
// one to a registration still held.
func (r *Registration) exposure() (gen uint64, ok bool) {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.gen, r.exposed && !r.released
}

// Lost returns a channel closed when the tunnel the rollout was given by
// Expose is found dead (by the monitor or CheckTunnel), so that its
// harness can be stopped at once rather than run on with no way to its
// model. It is closed already when the tunnel died before the call, and
// nil (never ready) for a rollout that was never exposed, is released or
// has no tunnel of its own to lose (a local pool).
func (r *Registration) Lost() <-chan struct{} {
	gen, ok := r.exposure()
	if !ok || r.p.Loopback() {
		return nil
	}
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen || m.dead == nil {
		return closedChan
	}
	return m.dead
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

// Finish ends the rollout's calls and returns its turns: its secret stops
// working, and the calls whose caller already has its answer are recorded
// first. The registration stays held until Release.
func (r *Registration) Finish() ([]trace.Turn, bool) {
	if !r.live() {
		return nil, false
	}
	return r.m.srv.Finish(r.key)
}

// Release frees the rollout's slot for another rollout; its secret stops
// working and its turns are let go (read them with Finish first). Later
// calls do nothing.
func (r *Registration) Release() {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	if p.regs[r.key] == r {
		delete(p.regs, r.key)
	}
	r.m.srv.Unregister(r.key)
}

// Servers is how many servers the pool has started.
func (p *Pool) Servers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.servers)
}

// Tunnels is how many tunnels are up.
func (p *Pool) Tunnels() int {
	p.mu.Lock()
	servers := slices.Clone(p.servers)
	p.mu.Unlock()
	n := 0
	for _, m := range servers {
		m.mu.Lock()
		if m.exposure != nil {
			n++
		}
		m.mu.Unlock()
	}
	return n
}

// Close stops the monitor and closes every tunnel and server. The pool cannot
// be used after.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	servers := p.servers
	p.mu.Unlock()
	p.cancel()
	var errs []error
	for _, m := range servers {
		if err := m.close(); err != nil {
			errs = append(errs, err)
		}
	}
	p.bg.Wait()
	return errors.Join(errs...)
}
