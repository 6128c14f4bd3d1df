package sidecar_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/sidecar"
	"github.com/evalflow/evalflow/trace"
)

// rollout is a rollout of the fake proxy.
type rollout struct {
	state sidecar.State
	begun int
}

func (r *rollout) Model() string         { return "policy-7" }
func (r *rollout) Begun() int            { return r.begun }
func (r *rollout) State() *sidecar.State { return &r.state }

// proxy serves one rollout, whose secret is "s", and answers every
// persona call with answer.
type proxy struct {
	ro     *rollout
	answer string
	asked  []dialects.Request
}

func (p *proxy) Authenticate(w http.ResponseWriter, r *http.Request) (sidecar.Rollout, dialects.Dialect, bool) {
	if r.Header.Get("Authorization") != "Bearer s" {
		dialects.Chat.WriteError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided.")
		return nil, dialects.Chat, false
	}
	return p.ro, dialects.Chat, true
}

func (p *proxy) ReadBody(_ http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, string, string) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if int64(len(b)) > limit {
		return nil, http.StatusRequestEntityTooLarge, "request_too_large", "too large"
	}
	return b, 0, "", ""
}

func (p *proxy) Ask(_ context.Context, _ sidecar.Rollout, turn *trace.Turn) (string, error) {
	p.asked = append(p.asked, turn.Request)
	turn.Status = http.StatusOK
	return p.answer, nil
}

func call(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer s")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestStateOverAProxy(t *testing.T) {
	p := &proxy{ro: &rollout{}}
	h := sidecar.New(p, 1<<30)
	status, body := call(t, h, http.MethodPatch, "/state", `{"a":{"b":1},"c":2}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, h, http.MethodPatch, "/state", `{"a":{"d":3},"c":null}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"a":{"b":1,"d":3}}`, body)
	assert.JSONEq(t, `{"a":{"b":1,"d":3}}`, string(p.ro.state.Side().State), "the state the trace keeps")

	status, _ = call(t, h, http.MethodPut, "/state", `{"big":"`+strings.Repeat("x", sidecar.StateLimit)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, "a body over StateLimit, whatever the server's own bound")
}

func TestPersonaAnswersThroughTheProxy(t *testing.T) {
	p := &proxy{ro: &rollout{begun: 3}, answer: "Thanks, that is all. [DONE]"}
	h := sidecar.New(p, 1<<20)
	p.ro.state.SetTask(json.RawMessage(`{"prompt":"What is 2+2?","user":{"persona":"You ask: {{prompt}}"}}`))

	status, body := call(t, h, http.MethodPost, "/user", `{"messages":[{"role":"assistant","content":"4"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"index":1,"content":"Thanks, that is all.","done":true}`, body)
	require.Len(t, p.asked, 1)
	assert.Equal(t, "policy-7", p.asked[0].Model, "the persona answers with the rollout's model")
	assert.Equal(t, "You ask: What is 2+2?\n\nassistant: 4", p.asked[0].Messages[0].Text())

	users := p.ro.state.Side().Users
	require.Len(t, users, 1)
	assert.Equal(t, 3, users[0].AfterTurn, "the user's turn comes after the calls begun")
	require.NotNil(t, users[0].Call)
	assert.Equal(t, "user", users[0].Call.Route)
}
