package engine_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine"
)

// A build that Podman fails with "layer not known" (an image removed while
// it looked for one to reuse) is tried again with the whole context: the
// context sent the first time is sent again, byte for byte.
func TestBuildIsRetriedWithItsWholeContext(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.True(t, strings.HasSuffix(r.URL.Path, "/build"), r.URL.Path)
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		mu.Lock()
		bodies = append(bodies, b)
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			_, _ = io.WriteString(w, `{"error":"layer not known","errorDetail":{"message":"layer not known"}}`+"\n")
			return
		}
		_, _ = io.WriteString(w, `{"stream":"Successfully built"}`+"\n")
	}))
	defer srv.Close()
	c, err := engine.New("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)

	context := bytes.Repeat([]byte("tar bytes "), 1000)
	require.NoError(t, c.Build(t.Context(), bytes.NewReader(context), engine.BuildOptions{Tag: "localhost/retry:1"}))
	require.Len(t, bodies, 2, "tried again after the engine's own failure")
	assert.Equal(t, context, bodies[0])
	assert.Equal(t, context, bodies[1], "the second try sends the whole context again")
}
