package targets_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// Every client of the bench's servers drops an idle connection before the
// server would: a server closing an idle connection just as the reverse
// proxy reuses it fails the proxy's call, whose body cannot be sent again.
func TestClientsDropIdleConnectionsBeforeServers(t *testing.T) {
	assert.Less(t, targets.Transport().IdleConnTimeout, upstream.IdleTimeout, "reverse proxy transport")
	lg, ok := loadgen.NewClient(1).HTTP.Transport.(*http.Transport)
	if assert.True(t, ok) {
		assert.Less(t, lg.IdleConnTimeout, upstream.IdleTimeout, "load generator")
	}
}
