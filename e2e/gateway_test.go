package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/wiring"
)

// A worker with --gateway-addr serves the rollout gateway at that stable
// address: a trainer registers there with plain HTTP, its agent calls the
// model below it with the official SDK, and each registration holds a
// unit of the worker's capacity until it is unregistered.
func TestWorkerServesTheGatewayAtItsAddress(t *testing.T) {
	t.Parallel()
	_, c := devtest.StartEvalflow(t)
	const token = "gw-e2e-token"
	w := startWorker(t, c, wiring.Config{
		TaskQueue: "gateway", MaxRollouts: 1,
		Interception: wiring.Interception{GatewayToken: token, GatewayAddr: "127.0.0.1:0"},
	})
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

// seedSummary is what examples/gateway_seed.py prints last.
type seedSummary struct {
	RolloutID       string   `json:"rollout_id"`
	AgentExitCode   *int     `json:"agent_exit_code"`
	AgentAnswer     string   `json:"agent_answer"`
	AgentStderr     string   `json:"agent_stderr"`
	Prompt          []string `json:"prompt"`
	CompletionRoles []string `json:"completion_roles"`
	FinalAnswer     string   `json:"final_answer"`
	IsTruncated     *bool    `json:"is_truncated"`
	Steps           []struct {
		PromptTokens     int      `json:"prompt_tokens"`
		CompletionTokens int      `json:"completion_tokens"`
		Logprobs         int      `json:"logprobs"`
		MasksOK          bool     `json:"masks_ok"`
		FinishReason     string   `json:"finish_reason"`
		ExtendsPrevious  bool     `json:"extends_previous"`
		ToolCalls        []string `json:"tool_calls"`
	} `json:"steps"`
	Unregistered bool    `json:"unregistered"`
	Error        *string `json:"error"`
}

// runSeedClient runs examples/gateway_seed.py against the gateway at root
// and returns its summary and whether it exited 0.
func runSeedClient(t *testing.T, python, root, token string, args ...string) (seedSummary, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"../examples/gateway_seed.py", "--gateway", root, "--model", "policy"}, args...)...)
	cmd.Env = append(os.Environ(), "EVALFLOW_GATEWAY_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var s seedSummary
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &s), "the last line is a JSON summary: %s; stderr: %s", out, stderr.String())
	return s, err == nil
}

// A client written only from verifiers' RolloutGatewayMixin document
// (examples/gateway_seed.py, standard library only) completes a rollout
// against a worker's gateway: its agent, a subprocess with
// OPENAI_BASE_URL={gateway}/v1/rollouts/{id} and the gateway token as its
// key, answers with a tool call in two turns; the trajectory it reads has
// both steps with token ids, masks and logprobs; it unregisters, on an
// agent's failure too.
func TestSeedClientAgainstTheWorkerGateway(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 runs the documented example (make setup installs it)")
	_, c := devtest.StartEvalflow(t)
	const token = "gw-seed-token-7c1d"
	w := startWorker(t, c, wiring.Config{
		TaskQueue: "gateway-seed", MaxRollouts: 1,
		Interception: wiring.Interception{GatewayToken: token, GatewayAddr: "127.0.0.1:0"},
	})
	root := "http://" + w.GatewayAddr()

	s, ok := runSeedClient(t, python, root, token)
	require.True(t, ok, "%+v", s)
	assert.Nil(t, s.Error)
	require.NotNil(t, s.AgentExitCode)
	assert.Equal(t, 0, *s.AgentExitCode, s.AgentStderr)
	assert.Equal(t, "The answer is 5.", s.AgentAnswer)
	assert.True(t, strings.HasPrefix(s.RolloutID, "rollout_"))
	assert.Equal(t, []string{"What is 2 + 3?"}, s.Prompt)
	assert.Equal(t, []string{"assistant", "tool", "assistant"}, s.CompletionRoles)
	assert.Equal(t, "The answer is 5.", s.FinalAnswer)
	require.NotNil(t, s.IsTruncated)
	assert.False(t, *s.IsTruncated)
	require.Len(t, s.Steps, 2)
	assert.Equal(t, []string{"calculator"}, s.Steps[0].ToolCalls)
	assert.Equal(t, "tool_calls", s.Steps[0].FinishReason)
	assert.Equal(t, "stop", s.Steps[1].FinishReason)
	for i, st := range s.Steps {
		assert.True(t, st.MasksOK, "step %d: prompt_mask zeros, completion_mask ones", i)
		assert.Positive(t, st.CompletionTokens, "step %d", i)
		assert.Equal(t, st.CompletionTokens, st.Logprobs, "step %d: a logprob per completion token", i)
	}
	assert.True(t, s.Steps[1].ExtendsPrevious, "turn 2's prompt extends turn 1's exactly")
	assert.True(t, s.Unregistered)

	// A failing agent (a key that is neither the gateway token nor the
	// rollout's secret: 401) still ends with the rollout unregistered:
	// the worker's one unit of capacity is free for the next.
	s, ok = runSeedClient(t, python, root, token, "--agent-key", "wrong-key")
	require.True(t, ok, "the environment itself did not fail: %+v", s)
	require.NotNil(t, s.AgentExitCode)
	assert.Equal(t, 1, *s.AgentExitCode)
	assert.Contains(t, s.AgentStderr, "401")
	assert.Empty(t, s.Steps, "no model call was made")
	assert.True(t, s.Unregistered)
	s, ok = runSeedClient(t, python, root, token)
	require.True(t, ok, "%+v", s)
	assert.Len(t, s.Steps, 2, "capacity was given back")
}
