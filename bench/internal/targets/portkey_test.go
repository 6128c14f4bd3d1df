package targets_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// startPortkey starts the gateway in front of the mock at base, installing
// it from npm into the bench's cache first when it is not there (as the
// packaged-harness tests install codex and claude-code): a machine without
// npm or the registry fails the test, it does not skip it.
func startPortkey(t *testing.T, base string) *targets.Portkey {
	t.Helper()
	dir := targets.PortkeyDir()
	_, err := targets.InstallPortkey(context.Background(), dir)
	require.NoError(t, err, "install %s into %s", targets.PortkeyPackage, dir)
	p, err := targets.StartPortkey(context.Background(), dir, base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestPortkeyRelaysToTheMock(t *testing.T) {
	base := mock(t, upstream.Config{BodyBytes: 4 << 10})
	p := startPortkey(t, base)
	c := loadgen.NewClient(2)
	for range 3 {
		_, err := c.Do(context.Background(), p.Target("portkey", targets.Body(targets.Chat, 4<<10, false)))
		require.NoError(t, err)
	}
	assert.Positive(t, p.CPU(), "the gateway's process used no CPU time")
	require.NoError(t, p.Close())
	_, err := c.Do(context.Background(), p.Target("portkey", targets.Body(targets.Chat, 100, false)))
	require.Error(t, err, "the gateway still answers after Close")
}

func TestStartPortkeyWithoutNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := targets.StartPortkey(context.Background(), t.TempDir(), "http://127.0.0.1:1")
	require.ErrorIs(t, err, targets.ErrPeerUnavailable)
}

func TestPortkeyListensOnLoopbackOnly(t *testing.T) {
	base := mock(t, upstream.Config{BodyBytes: 100})
	p := startPortkey(t, base)
	port, err := strconv.Atoi(p.URL[strings.LastIndexByte(p.URL, ':')+1:])
	require.NoError(t, err)
	addrs := listening(t, port)
	require.NotEmpty(t, addrs, "nothing listens on port %d", port)
	for _, a := range addrs {
		assert.Equal(t, "0100007F", a, "the gateway listens on %s, not 127.0.0.1", a)
	}
}

// listening returns the local addresses (as /proc/net/tcp spells them) of
// the sockets listening on port, IPv4 and IPv6.
func listening(t *testing.T, port int) []string {
	var addrs []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			addr, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				addrs = append(addrs, addr)
			}
		}
	}
	return addrs
}
