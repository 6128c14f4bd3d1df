package interception

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// TestRecorder checks that a turn is numbered on arrival and recorded with
// what went wrong, while the caller is answered in its own dialect, and
// that a call that is no turn leaves no trace and takes no number.
func TestRecorder(t *testing.T) {
	s := &Server{cfg: Config{}.withDefaults()}
	e := &entry{rollout: Rollout{Key: "run/0/0/0"}}
	call := func(path string) (*httptest.ResponseRecorder, *http.Request) {
		return httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, nil)
	}

	w, r := call("/v1/messages/count_tokens")
	c := s.startCall(w, r, e, dialects.Anthropic)
	c.fail(http.StatusBadRequest, "", "bad body")
	c.finish()
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.JSONEq(t, `{"type":"error","error":{"type":"invalid_request_error","message":"bad body"}}`, w.Body.String())
	assert.Empty(t, e.snapshot(), "a call that is no turn is not recorded")
	assert.Zero(t, e.delivered, "nor waited for")

	w, r = call("/v1/chat/completions")
	c = s.startTurn(w, r, e, dialects.Chat)
	c.failWith("upstream: connection refused", http.StatusBadGateway, "upstream_unavailable", "The upstream could not be reached.")
	// A harness that exits on the error has its rollout finished at once:
	// Finish waits for the turn of an answered call.
	assert.Equal(t, 1, e.delivered, "an error is the caller's whole answer")
	c.finish()
	assert.Equal(t, http.StatusBadGateway, w.Code)
	assert.JSONEq(t, `{"error":{"message":"The upstream could not be reached.","type":"server_error","param":null,"code":"upstream_unavailable"}}`, w.Body.String())
	turns := e.snapshot()
	require.Len(t, turns, 1)
	assert.Equal(t, 0, turns[0].Index, "the first turn, after a call that is none")
	assert.Equal(t, dialects.NameChat, turns[0].Dialect)
	assert.Equal(t, "/v1/chat/completions", turns[0].Route)
	assert.Equal(t, http.StatusBadGateway, turns[0].Status)
	assert.Equal(t, "upstream: connection refused", turns[0].Error, "the turn keeps what the caller is not told")
	assert.Positive(t, turns[0].Latency)
	assert.Zero(t, e.delivered, "the turn is in")
}
