package devserver

import (
	"net"
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
