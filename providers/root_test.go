package providers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/providers"
)

// RelayRoot calls a route beside /v1 (vLLM's /tokenize), retried as
// Relay's calls are unless once.
func TestRelayRoot(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		n := len(paths)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(`{"tokens": [1]}`))
	}))
	t.Cleanup(srv.Close)
	c := providers.NewOpenAI(srv.URL+"/v1/", "k")
	c.BaseDelay, c.MaxDelay = time.Millisecond, time.Millisecond

	resp, attempts, err := c.RelayRoot(context.Background(), "/tokenize", nil, dialects.Body{[]byte(`{}`)}, false)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, attempts, "a 503 is retried")

	resp, attempts, err = c.RelayRoot(context.Background(), "/tokenize", nil, dialects.Body{[]byte(`{}`)}, true)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 1, attempts)
	assert.Equal(t, []string{"/tokenize", "/tokenize", "/tokenize"}, paths, "at the server's root, not below /v1")
}
