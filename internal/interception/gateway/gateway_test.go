package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/interception/gateway"
)

const token = "gw-unit-token"

func call(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestRegisterOverAPool(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}}
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	g := gateway.New(pool, gateway.Config{Token: token, Now: func() time.Time { return now }})

	w := call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/register", `{"model":"m","max_seq_len":64,"ttl":"90m"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var reg gateway.Registration
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reg))
	assert.Equal(t, gateway.Registration{RolloutID: "r1", BaseURL: "http://tunnel.example", OpenAIBaseURL: "http://tunnel.example/v1",
		APIKey: "secret-of-gateway/r1", ExpiresAt: now.Add(90 * time.Minute)}, reg)
	req := pool.held[gateway.KeyPrefix+"r1"]
	require.NotNil(t, req.Sampling.MaxTokens)
	assert.Equal(t, 64, *req.Sampling.MaxTokens, "a call's max tokens is capped at max_seq_len")

	w = call(t, g.Standalone(), http.MethodPost, "/v1/rollouts/r2/register", `{"model":"m"}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &reg))
	assert.Equal(t, "http://example.com/v1/rollouts/r2", reg.BaseURL, "a standalone gateway's base URL is its own")
	w = call(t, g.Standalone(), http.MethodPost, "/v1/rollouts/r2/v1/chat/completions", `{}`)
	assert.Equal(t, "gateway/r2 /v1/chat/completions", w.Body.String(), "model calls go to the rollout's server")
	w = call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r2/v1/chat/completions", `{}`)
	assert.Equal(t, http.StatusNotFound, w.Code, "a pool's server serves its own model routes")
}

func TestRegisterGivesTheUnitBack(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}, exposeErr: errors.New("tunnel down")}
	capacity := &slots{taken: map[string]bool{}, n: 1}
	g := gateway.New(pool, gateway.Config{Token: token, Slots: capacity})

	w := call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/register", `{"model":"m"}`)
	assert.Equal(t, http.StatusBadGateway, w.Code, w.Body.String())
	assert.Empty(t, capacity.taken, "the unit of capacity is given back")
	assert.False(t, pool.Held(gateway.KeyPrefix+"r1"), "the slot is released")

	pool.exposeErr = nil
	assert.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/register", `{"model":"m"}`).Code)
	assert.Equal(t, http.StatusServiceUnavailable, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r2/register", `{"model":"m"}`).Code, "at capacity")
	assert.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/unregister", "").Code)
	assert.Empty(t, capacity.taken, "unregister gives the unit back")
}

func TestSweepEndsExpiredRegistrations(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}}
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	g := gateway.New(pool, gateway.Config{Token: token, TTL: time.Hour, Now: func() time.Time { return now }})
	for _, body := range []string{`{"model":"m"}`, `{"model":"m","ttl":7200}`} {
		id := "r" + string(rune('0'+len(pool.held)))
		require.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/"+id+"/register", body).Code)
	}
	now = now.Add(time.Hour)
	assert.Equal(t, []string{"r0"}, g.Sweep(), "the registration of the default TTL")
	assert.False(t, pool.Held(gateway.KeyPrefix+"r0"))
	assert.True(t, pool.Held(gateway.KeyPrefix+"r1"))
}
