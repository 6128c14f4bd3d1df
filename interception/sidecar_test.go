package interception_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sideCall sends one request to a side route and returns its status and body.
func sideCall(t *testing.T, method, url, secret, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestStateGetPutPatch(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), nil)
	url := f.slot.LocalURL + "/state"

	status, body := sideCall(t, http.MethodGet, url, f.slot.Secret, "")
	require.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{}`, body, "a fresh rollout's state")

	status, body = sideCall(t, http.MethodPut, url, f.slot.Secret, `{"counter":1,"notes":{"a":1,"b":2}}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"counter":1,"notes":{"a":1,"b":2}}`, body)

	status, body = sideCall(t, http.MethodPatch, url, f.slot.Secret, `{"counter":2,"notes":{"a":null,"c":3},"new":"x"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"counter":2,"notes":{"b":2,"c":3},"new":"x"}`, body, "a JSON merge patch")

	status, body = sideCall(t, http.MethodGet, url, f.slot.Secret, "")
	require.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"counter":2,"notes":{"b":2,"c":3},"new":"x"}`, body)

	for _, bad := range []string{`[1,2]`, `"x"`, `not json`, ``, `null`, `{"n":1e400}`} {
		status, body = sideCall(t, http.MethodPut, url, f.slot.Secret, bad)
		assert.Equal(t, http.StatusBadRequest, status, "PUT %q", bad)
		assert.Contains(t, body, `"error"`, "PUT %q answers in the OpenAI shape", bad)
	}
	side, ok := f.slot.Side()
	require.True(t, ok)
	assert.JSONEq(t, `{"counter":2,"notes":{"b":2,"c":3},"new":"x"}`, string(side.State), "the state the trace keeps")

	big := `{"blob":"` + strings.Repeat("x", 1<<20) + `"}`
	status, _ = sideCall(t, http.MethodPut, url, f.slot.Secret, big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, "a state over 1 MiB")
}

// Concurrent increments by read-modify-write would lose updates; PATCHes
// are applied one at a time, so the last answer names every member.
func TestStatePatchesAreAtomic(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), nil)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			status, _ := sideCall(t, http.MethodPatch, f.slot.LocalURL+"/state", f.slot.Secret, `{"k`+string(rune('a'+i))+`":true}`)
			assert.Equal(t, http.StatusOK, status)
		})
	}
	wg.Wait()
	_, body := sideCall(t, http.MethodGet, f.slot.LocalURL+"/state", f.slot.Secret, "")
	var got map[string]bool
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Len(t, got, 20)
}

func TestSideRoutesNeedTheSecret(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), nil)
	require.True(t, f.slot.SetTask(json.RawMessage(`{"id":"t1","prompt":"count"}`)))
	for _, tt := range []struct{ method, path, body string }{
		{http.MethodGet, "/state", ""},
		{http.MethodPut, "/state", `{"counter":99}`},
		{http.MethodPatch, "/state", `{"counter":99}`},
		{http.MethodGet, "/task", ""},
		{http.MethodPost, "/user", `{"content":"hi"}`},
	} {
		for _, secret := range []string{"", "wrong", f.slot.Secret + "x"} {
			status, body := sideCall(t, tt.method, f.slot.LocalURL+tt.path, secret, tt.body)
			assert.Equal(t, http.StatusUnauthorized, status, "%s %s with secret %q", tt.method, tt.path, secret)
			assert.Contains(t, body, "invalid_api_key", "%s %s: OpenAI's error shape", tt.method, tt.path)
		}
		// An Anthropic caller gets Anthropic's shape.
		status, body := sideCall(t, tt.method, f.slot.LocalURL+tt.path, "", tt.body, "X-Api-Key", "wrong", "Anthropic-Version", "2023-06-01")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, body, `"type":"error"`, "%s %s: Anthropic's error shape", tt.method, tt.path)
	}
	side, _ := f.slot.Side()
	assert.Nil(t, side.State, "no unauthenticated write reached the state")
	assert.Empty(t, side.Users)
}

func TestTaskAndUserTurns(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), nil)
	status, body := sideCall(t, http.MethodGet, f.slot.LocalURL+"/task", f.slot.Secret, "")
	assert.Equal(t, http.StatusNotFound, status, "no task before the rollout's is set: %s", body)

	require.True(t, f.slot.SetTask(json.RawMessage(`{"id":"t1","prompt":"count to three"}`)))
	status, body = sideCall(t, http.MethodGet, f.slot.LocalURL+"/task", f.slot.Secret, "")
	require.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"id":"t1","prompt":"count to three"}`, body)
	status, _ = sideCall(t, http.MethodPut, f.slot.LocalURL+"/task", f.slot.Secret, `{}`)
	assert.Equal(t, http.StatusMethodNotAllowed, status, "/task is read-only")

	status, body = sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"content":"and now four?"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"index":1,"content":"and now four?","done":false}`, body)
	status, _ = sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"content":"thanks","done":true}`)
	require.Equal(t, http.StatusOK, status)
	status, _ = sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"done":true}`)
	assert.Equal(t, http.StatusBadRequest, status, "a user turn without content")

	side, ok := f.slot.Side()
	require.True(t, ok)
	require.Len(t, side.Users, 2)
	assert.Equal(t, "and now four?", side.Users[0].Content)
	assert.False(t, side.Users[0].Done)
	assert.Equal(t, 2, side.Users[1].Index)
	assert.True(t, side.Users[1].Done)
}

// A persona answers at most its max_turns turns: a harness cannot spend
// the provider's tokens through it.
func TestPersonaTurnsAreBounded(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), nil)
	status, body := sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusBadRequest, status, "no persona before the task names one: %s", body)
	assert.Contains(t, body, "no_persona")

	require.True(t, f.slot.SetTask(json.RawMessage(`{"id":"t","prompt":"What is 2+2?","user":{"persona":"You are a student. {{prompt}}","max_turns":2}}`)))
	for i := range 2 {
		status, body = sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"messages":[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4"}]}`)
		require.Equal(t, http.StatusOK, status, "turn %d: %s", i+1, body)
	}
	status, body = sideCall(t, http.MethodPost, f.slot.LocalURL+"/user", f.slot.Secret, `{"messages":[]}`)
	assert.Equal(t, http.StatusTooManyRequests, status, body)
	side, _ := f.slot.Side()
	require.Len(t, side.Users, 2)
	for _, u := range side.Users {
		require.NotNil(t, u.Call)
		assert.Equal(t, http.StatusOK, u.Call.Status)
		assert.Contains(t, u.Call.Request.Messages[0].Text(), "You are a student. What is 2+2?")
		assert.Equal(t, u.Call.Response.Message.Text(), u.Content, "the persona's reply is the user's turn")
	}
}
