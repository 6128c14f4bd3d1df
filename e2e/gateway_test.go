package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/interception/gateway"
	"github.com/evalflow/evalflow/internal/wiring"
)

// A worker with --gateway-addr serves the rollout gateway at that stable
// address: a trainer registers there with plain HTTP, its agent calls the
// model below it with the official SDK, and each registration holds a
// unit of the worker's capacity until it is unregistered.
func TestWorkerServesTheGatewayAtItsAddress(t *testing.T) {
	_, c := startServer(t)
	const token = "gw-e2e-token"
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: "gateway", RunsDir: t.TempDir(), MaxRollouts: 1, Logger: slog.New(slog.DiscardHandler),
		Interception: wiring.Interception{GatewayToken: token, GatewayAddr: "127.0.0.1:0"},
	})
	require.NoError(t, err)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	root := "http://" + w.GatewayAddr()
	require.NotEqual(t, "http://", root)

	call := func(method, path, body string) (int, []byte) {
		req, err := http.NewRequest(method, root+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	status, body := call(http.MethodPost, "/v1/rollouts/e2e-1/register", `{"model":"policy","max_turns":4,"trace_tokens":true}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var reg gateway.Registration
	require.NoError(t, json.Unmarshal(body, &reg))
	assert.Equal(t, root+"/v1/rollouts/e2e-1/v1", reg.OpenAIBaseURL)

	status, _ = call(http.MethodPost, "/v1/rollouts/e2e-2/register", `{"model":"policy"}`)
	assert.Equal(t, http.StatusServiceUnavailable, status, "the worker's one unit of capacity is held")

	oc := openai.NewClient(option.WithBaseURL(reg.OpenAIBaseURL+"/"), option.WithAPIKey(reg.APIKey), option.WithMaxRetries(0))
	resp, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "anything", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 6 * 7?")},
	})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Choices)

	status, body = call(http.MethodPost, "/v1/rollouts/e2e-1/unregister", "")
	require.Equal(t, http.StatusOK, status, string(body))
	var tr gateway.Trajectory
	require.NoError(t, json.Unmarshal(body, &tr))
	require.Len(t, tr.Turns, 1)
	require.Len(t, tr.Tokens, 1, "the offline mock returns token data when asked")
	assert.NotEmpty(t, tr.Tokens[0].CompletionIDs)

	status, _ = call(http.MethodPost, "/v1/rollouts/e2e-2/register", `{"model":"policy"}`)
	assert.Equal(t, http.StatusOK, status, "unregistering gave the capacity back")
}
