package container_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
)

// gate is the engine's socket behind one the test can close: while it is
// down, nothing listens at its path and every connection made through it
// is cut, as when the engine's service stops.
type gate struct {
	t          *testing.T
	path, real string
	mu         sync.Mutex
	ln         net.Listener
	conns      []net.Conn
}

func newGate(t *testing.T, real *engine.Client) *gate {
	u, err := url.Parse(real.Host())
	require.NoError(t, err)
	require.Equal(t, "unix", u.Scheme, "the test engine is reached by its socket")
	g := &gate{t: t, path: filepath.Join(t.TempDir(), "engine.sock"), real: u.Path}
	g.up()
	t.Cleanup(g.down)
	return g
}

func (g *gate) up() {
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

func (g *gate) forward(c net.Conn) {
	e, err := net.Dial("unix", g.real)
	if err != nil {
		_ = c.Close()
		return
	}
	g.mu.Lock()
	g.conns = append(g.conns, c, e)
	g.mu.Unlock()
	go func() { _, _ = io.Copy(e, c); _ = e.Close() }()
	_, _ = io.Copy(c, e)
	_ = c.Close()
}

// down stops listening and cuts every connection through the gate.
func (g *gate) down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.conns = nil
	_ = os.Remove(g.path)
}

// A sandbox whose removal met an engine that was gone is removed once the
// engine answers again, by the next sandbox this runtime starts: an
// outage leaves no sandbox behind.
func TestSandboxesAnOutageLeftAreRemovedWhenTheEngineReturns(t *testing.T) {
	real := enginetest.Client(t)
	g := newGate(t, real)
	eng, err := engine.New("unix://" + g.path)
	require.NoError(t, err)
	r := &container.Runtime{Engine: eng, Agent: containertest.Agent(t), Dir: t.TempDir(), Worker: "test"}
	tk := task(t, "testdata/steps", "three-files")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := func(key string) *harness.Workspace {
		ws, err := r.PrepareWorkspace("", tk)
		require.NoError(t, err)
		res, err := r.Run(ctx, harness.Spec{Key: key, Command: []string{"true"}, BaseURL: "http://127.0.0.1:9", Secret: "s3cret",
			Task: tk, Timeout: time.Minute, Workspace: ws})
		require.NoError(t, err)
		require.Zero(t, res.ExitCode)
		return ws
	}
	sandboxes := func(key string) int {
		list, err := real.ListContainers(ctx, "evalflow.rollout="+key)
		require.NoError(t, err)
		return len(list)
	}

	first := start("outage/0/0/0")
	require.Equal(t, 1, sandboxes("outage/0/0/0"))
	g.down()
	err = first.Remove()
	var down *engine.UnavailableError
	require.ErrorAs(t, err, &down, "the engine is gone")
	assert.Equal(t, 1, sandboxes("outage/0/0/0"), "its sandbox outlives the outage's first attempt to remove it")

	g.up()
	second := start("outage/0/1/0")
	defer func() { assert.NoError(t, second.Remove()) }()
	assert.Zero(t, sandboxes("outage/0/0/0"), "the engine back, the next sandbox's start removed the one it owed")
}
