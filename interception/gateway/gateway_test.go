package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/trace"
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
}

// An agent's base URL is {gateway}/v1/rollouts/{id}, as verifiers'
// RolloutGatewayMixin sets OPENAI_BASE_URL, or that and /v1; its key the
// rollout's secret or the gateway token, which is swapped for the secret.
// Every interception server serves them as the standalone gateway does.
func TestModelRoutesBelowTheRollout(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}}
	g := gateway.New(pool, gateway.Config{Token: token, ModelPaths: []string{"/chat/completions", "/messages", "/messages/count_tokens", "/models"}})
	require.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/register", `{"model":"m"}`).Code)
	const secret = "secret-of-gateway/r1"
	for name, h := range map[string]http.Handler{"on a pool's server": g.Handler(), "standalone": g.Standalone()} {
		for _, tc := range []struct{ path, bearer, apiKey, want string }{
			{"/v1/rollouts/r1/chat/completions", token, "", "gateway/r1 /v1/chat/completions Bearer " + secret + " "},
			{"/v1/rollouts/r1/v1/chat/completions", token, "", "gateway/r1 /v1/chat/completions Bearer " + secret + " "},
			{"/v1/rollouts/r1/chat/completions", secret, "", "gateway/r1 /v1/chat/completions Bearer " + secret + " "},
			{"/v1/rollouts/r1/chat/completions", "other", "", "gateway/r1 /v1/chat/completions Bearer other "},
			{"/v1/rollouts/r1/messages", "", token, "gateway/r1 /v1/messages  " + secret},
			{"/v1/rollouts/r1/messages/count_tokens", "", "other", "gateway/r1 /v1/messages/count_tokens  other"},
			{"/v1/rollouts/r1/v1/messages", "", token, "gateway/r1 /v1/messages  " + secret},
			{"/v1/rollouts/r1/models", token, "", "gateway/r1 /v1/models Bearer " + secret + " "},
			{"/v1/rollouts/r9/chat/completions", token, "", "gateway/r9 /v1/chat/completions Bearer " + token + " "},
		} {
			r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(`{}`))
			if tc.bearer != "" {
				r.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			if tc.apiKey != "" {
				r.Header.Set("X-Api-Key", tc.apiKey)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tc.want, w.Body.String(), "%s: POST %s (bearer %q, x-api-key %q)", name, tc.path, tc.bearer, tc.apiKey)
		}
		w := call(t, h, http.MethodPost, "/v1/rollouts/r1/explode", `{}`)
		assert.Equal(t, http.StatusNotFound, w.Code, "%s: not a model route", name)
		assert.Contains(t, w.Body.String(), "unknown gateway route", name)
	}
}

// The register body takes prime-rl's sampling_params for sampling, and
// refuses both, and bad staleness settings, naming them.
func TestRegisterBody(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}}
	g := gateway.New(pool, gateway.Config{Token: token})
	w := call(t, g.Handler(), http.MethodPost, "/v1/rollouts/p/register",
		`{"model":"m","sampling_params":{"temperature":0.7,"max_tokens":32,"n":1,"logprobs":true,"top_logprobs":2},"max_turns":3,"policy_version":4,"max_off_policy_steps":1,"extra":true}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	req := pool.held[gateway.KeyPrefix+"p"]
	require.NotNil(t, req.Sampling.Temperature)
	assert.InDelta(t, 0.7, *req.Sampling.Temperature, 1e-9)
	require.NotNil(t, req.Sampling.MaxTokens)
	assert.Equal(t, 32, *req.Sampling.MaxTokens)
	assert.Nil(t, req.SamplingParams, "moved to sampling")
	assert.Equal(t, 3, req.MaxTurns)
	require.NotNil(t, req.PolicyVersion)
	assert.Equal(t, int64(4), *req.PolicyVersion)
	assert.True(t, req.TraceTokens, "sampling that asks for logprobs traces tokens")
	assert.Equal(t, 2, req.TopLogprobs)
	w = call(t, g.Handler(), http.MethodPost, "/v1/rollouts/q/register", `{"model":"m","sampling":{"temperature":1}}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.False(t, pool.held[gateway.KeyPrefix+"q"].TraceTokens, "no logprobs asked, no tokens traced")

	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","sampling":{},"sampling_params":{}}`, "sampling and sampling_params"},
		{`{"model":"m","max_off_policy_steps":-1}`, "max_off_policy_steps"},
		{`{"model":"m","policy_version":-2}`, "policy_version"},
		{`{"sampling_params":{}}`, "model is required"},
		{`[]`, "register body"},
	} {
		w := call(t, g.Handler(), http.MethodPost, "/v1/rollouts/bad/register", tc.body)
		assert.Equal(t, http.StatusBadRequest, w.Code, "register %s", tc.body)
		assert.Contains(t, w.Body.String(), tc.want, "register %s", tc.body)
	}
	assert.False(t, pool.Held(gateway.KeyPrefix+"bad"))
}

// A trajectory read at the trainer's policy_version marks each step's lag
// and the answer stale past the registration's max_off_policy_steps.
func TestTrajectoryStaleness(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	answered := func(i int, version *int64, prompt, completion []int32) trace.Turn {
		return trace.Turn{Index: i, Status: http.StatusOK, PolicyVersion: version,
			Tokens: &dialects.Tokens{PromptIDs: prompt, CompletionIDs: completion, Logprobs: make([]float32, len(completion))}}
	}
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}, turns: []trace.Turn{
		answered(0, v(1), []int32{1, 2}, []int32{3}), answered(1, v(3), []int32{1, 2, 3, 4}, []int32{5, 6}), answered(2, nil, []int32{9}, []int32{7}),
	}}
	g := gateway.New(pool, gateway.Config{Token: token})
	require.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/s/register", `{"model":"m","max_off_policy_steps":1}`).Code)
	read := func(query string) gateway.Trajectory {
		t.Helper()
		w := call(t, g.Handler(), http.MethodGet, "/v1/rollouts/s/trajectory"+query, "")
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		var tr gateway.Trajectory
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &tr))
		return tr
	}
	offs := func(tr gateway.Trajectory) []*int64 {
		var out []*int64
		for _, s := range tr.Trajectory {
			out = append(out, s.OffPolicySteps)
		}
		return out
	}

	tr := read("")
	assert.False(t, tr.Stale)
	assert.Equal(t, []*int64{nil, nil, nil}, offs(tr), "no version asked, no marks")
	assert.Equal(t, []int{2}, tr.PrefixBreaks)
	assert.Equal(t, "interleaved", tr.View)
	require.Len(t, tr.Samples, 2, "steps 0 and 1 interleave, step 2 breaks the prefix")
	assert.Equal(t, []int{0, 1}, tr.Samples[0].Steps)
	assert.Equal(t, []int32{3, 4, 5, 6}, tr.Samples[0].CompletionIDs)
	assert.Equal(t, []int{1, 0, 1, 1}, tr.Samples[0].CompletionMask)

	tr = read("?policy_version=2")
	assert.Equal(t, []*int64{v(1), v(-1), nil}, offs(tr))
	assert.False(t, tr.Stale, "one step behind is within max_off_policy_steps 1")
	tr = read("?policy_version=3&view=steps")
	assert.Equal(t, []*int64{v(2), v(0), nil}, offs(tr))
	assert.True(t, tr.Stale, "two steps behind")
	require.NotNil(t, tr.MaxOffPolicySteps)
	assert.Equal(t, 1, *tr.MaxOffPolicySteps)
	assert.Len(t, tr.Samples, 3, "a sample per step")

	for query, want := range map[string]string{
		"?view=flat":             `want \"interleaved\" or \"steps\"`,
		"?policy_version=latest": "policy_version",
		"?policy_version=-1":     "policy_version",
	} {
		for _, action := range []string{"trajectory", "unregister"} {
			method := map[string]string{"trajectory": http.MethodGet, "unregister": http.MethodPost}[action]
			w := call(t, g.Handler(), method, "/v1/rollouts/s/"+action+query, "")
			assert.Equal(t, http.StatusBadRequest, w.Code, "%s%s", action, query)
			assert.Contains(t, w.Body.String(), want, "%s%s", action, query)
		}
	}
	assert.True(t, pool.Held(gateway.KeyPrefix+"s"), "a bad unregister call ends nothing")
	w := call(t, g.Handler(), http.MethodPost, "/v1/rollouts/s/unregister?policy_version=3", "")
	require.Equal(t, http.StatusOK, w.Code)
	var end gateway.Trajectory
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &end))
	assert.True(t, end.Stale, "unregister answers as trajectory does")
}

func TestRegisterGivesTheUnitBack(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}, exposeErr: errors.New("tunnel down")}
	capacity := &slots{n: 1}
	g := gateway.New(pool, gateway.Config{Token: token, Slots: capacity})

	w := call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/register", `{"model":"m"}`)
	assert.Equal(t, http.StatusBadGateway, w.Code, w.Body.String())
	assert.Zero(t, capacity.held(), "the unit of capacity is given back")
	assert.False(t, pool.Held(gateway.KeyPrefix+"r1"), "the slot is released")

	pool.exposeErr = nil
	assert.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/register", `{"model":"m"}`).Code)
	assert.Equal(t, http.StatusServiceUnavailable, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r2/register", `{"model":"m"}`).Code, "at capacity")
	assert.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r1/unregister", "").Code)
	assert.Zero(t, capacity.held(), "unregister gives the unit back")
}

// Register calls of one id at once register it once: one takes the slot
// and a unit of capacity, the others are told it is taken.
func TestConcurrentRegistersOfOneIDTakeOneUnit(t *testing.T) {
	pool := &fakePool{held: map[string]gateway.RegisterRequest{}}
	capacity := &slots{n: 8}
	g := gateway.New(pool, gateway.Config{Token: token, Slots: capacity})
	codes := make([]int, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			codes[i] = call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r/register", `{"model":"m"}`).Code
		})
	}
	wg.Wait()
	slices.Sort(codes)
	c := http.StatusConflict
	assert.Equal(t, []int{http.StatusOK, c, c, c, c, c, c, c}, codes)
	assert.Equal(t, 1, capacity.held(), "one unit for the one registration")
	assert.Equal(t, http.StatusOK, call(t, g.Handler(), http.MethodPost, "/v1/rollouts/r/unregister", "").Code)
	assert.Zero(t, capacity.held())
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
