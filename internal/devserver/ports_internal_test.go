package devserver

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ports picked for the internal services lie below the ephemeral
// range, where no outgoing connection takes them before the server binds.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		port, err := FreePort("127.0.0.1")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, port, staticLow)
		assert.Less(t, port, ephemeralLow())
		seen[port] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		require.NoError(t, err, "the port is free to bind")
		require.NoError(t, ln.Close())
	}
	assert.Greater(t, len(seen), 1, "picked at random, not the same port each time")
}

// A port taken between the pick and the server's bind fails the start
// with ErrStartFailed, which the caller can retry, instead of exiting the
// process from inside the server.
func TestStartFailureIsAnError(t *testing.T) {
	taken, err := listenStatic("127.0.0.1")
	require.NoError(t, err)
	defer taken.Close()
	front, err := FreePort("127.0.0.1")
	require.NoError(t, err)
	cfg := Config{DataDir: t.TempDir(), Port: front, UIPort: -1}.withDefaults()
	p, err := allocatePorts(cfg)
	require.NoError(t, err)
	p.worker = taken.Addr().(*net.TCPAddr).Port
	logger, f, err := openServerLog(filepath.Join(cfg.DataDir, "temporal.log"))
	require.NoError(t, err)
	defer f.Close()
	_, err = startTemporal(cfg, p, logger)
	require.ErrorIs(t, err, ErrStartFailed)
	assert.Contains(t, err.Error(), "temporal.log")
}
