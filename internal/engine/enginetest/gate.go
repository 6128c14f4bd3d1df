package enginetest

import (
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine"
)

// Gate is the engine's socket behind one a test can close: while it is
// down, nothing listens at Path and every connection made through it is
// cut, as when the engine's service stops; the engine's containers run
// on meanwhile, as they do under Podman.
type Gate struct {
	// Host is the gate as DOCKER_HOST names it: unix://Path.
	Host string
	t    testing.TB
	path string
	real string
	mu   sync.Mutex
	ln   net.Listener
	open []net.Conn
}

// NewGate is a gate, up, in front of the engine real reaches by its
// socket; it is closed when the test ends.
func NewGate(t testing.TB, real *engine.Client) *Gate {
	t.Helper()
	u, err := url.Parse(real.Host())
	require.NoError(t, err)
	require.Equal(t, "unix", u.Scheme, "the test engine is reached by its socket")
	g := &Gate{t: t, path: filepath.Join(t.TempDir(), "engine.sock"), real: u.Path}
	g.Host = "unix://" + g.path
	g.Up()
	t.Cleanup(g.Down)
	return g
}

// Up listens again: the engine is back.
func (g *Gate) Up() {
	ln, err := net.Listen("unix", g.path)
	require.NoError(g.t, err)
	g.mu.Lock()
	g.ln = ln
	g.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.forward(c)
		}
	}()
}

func (g *Gate) forward(c net.Conn) {
	e, err := net.Dial("unix", g.real)
	if err != nil {
		_ = c.Close()
		return
	}
	g.mu.Lock()
	g.open = append(g.open, c, e)
	g.mu.Unlock()
	go func() { _, _ = io.Copy(e, c); _ = e.Close() }()
	_, _ = io.Copy(c, e)
	_ = c.Close()
}

// Down stops listening and cuts every connection through the gate.
func (g *Gate) Down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	for _, c := range g.open {
		_ = c.Close()
	}
	g.open = nil
	_ = os.Remove(g.path)
}
