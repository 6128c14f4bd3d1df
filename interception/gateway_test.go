package interception_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/interception/gateway"
)

const gatewayToken = "gw-test-token-1f2e3d"

func gatewayCall(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func TestGatewayRegisterRunTrajectoryUnregister(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), func(c *interception.Config) { c.GatewayToken = gatewayToken })
	root := f.slot.LocalURL + "/v1/rollouts/trainer-42"

	status, body := gatewayCall(t, http.MethodPost, root+"/register", gatewayToken, `{"model":"policy-7"}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var reg gateway.Registration
	require.NoError(t, json.Unmarshal(body, &reg))
	assert.Equal(t, "trainer-42", reg.RolloutID)
	assert.Equal(t, reg.BaseURL+"/v1", reg.OpenAIBaseURL)
	require.Len(t, reg.APIKey, 64)

	status, _ = gatewayCall(t, http.MethodPost, root+"/register", gatewayToken, `{"model":"policy-7"}`)
	assert.Equal(t, http.StatusConflict, status, "registering twice")

	// The trainer's agent talks to the rollout with the official client.
	c := openai.NewClient(option.WithBaseURL(reg.OpenAIBaseURL+"/"), option.WithAPIKey(reg.APIKey), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "anything",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")},
	})
	require.NoError(t, err)

	status, body = gatewayCall(t, http.MethodGet, root+"/trajectory", gatewayToken, "")
	require.Equal(t, http.StatusOK, status, string(body))
	var traj gateway.Trajectory
	require.NoError(t, json.Unmarshal(body, &traj))
	require.Len(t, traj.Turns, 1)
	assert.Equal(t, "policy-7", traj.Turns[0].Request.Model, "the registered model is the one called")

	status, body = gatewayCall(t, http.MethodPost, root+"/unregister", gatewayToken, "")
	require.Equal(t, http.StatusOK, status, string(body))
	require.NoError(t, json.Unmarshal(body, &traj))
	assert.Len(t, traj.Turns, 1)

	status, _ = gatewayCall(t, http.MethodGet, root+"/trajectory", gatewayToken, "")
	assert.Equal(t, http.StatusNotFound, status, "after unregister")
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "anything", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode, "the secret stops working")
}

func TestGatewayRejects(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), func(c *interception.Config) { c.GatewayToken = gatewayToken })
	off := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), nil)
	root := f.slot.LocalURL + "/v1/rollouts/"
	tests := []struct {
		name, method, url, token, body string
		want                           int
	}{
		{"no token", http.MethodPost, root + "r1/register", "", `{"model":"m"}`, http.StatusUnauthorized},
		{"wrong token", http.MethodPost, root + "r1/register", "nope", `{"model":"m"}`, http.StatusUnauthorized},
		{"rollout secret is not the gateway token", http.MethodPost, root + "r1/register", f.slot.Secret, `{"model":"m"}`, http.StatusUnauthorized},
		{"no model", http.MethodPost, root + "r1/register", gatewayToken, `{}`, http.StatusBadRequest},
		{"bad id", http.MethodPost, root + "a%20b/register", gatewayToken, `{"model":"m"}`, http.StatusNotFound},
		{"unknown action", http.MethodPost, root + "r1/explode", gatewayToken, ``, http.StatusNotFound},
		{"wrong method", http.MethodGet, root + "r1/register", gatewayToken, ``, http.StatusMethodNotAllowed},
		{"unknown rollout", http.MethodGet, root + "r9/trajectory", gatewayToken, ``, http.StatusNotFound},
		{"workflow rollouts are not reachable", http.MethodGet, root + "run/0/0/0/trajectory", gatewayToken, ``, http.StatusNotFound},
		{"disabled without a token", http.MethodPost, off.slot.LocalURL + "/v1/rollouts/r1/register", gatewayToken, `{"model":"m"}`, http.StatusNotFound},
	}
	for _, tt := range tests {
		status, body := gatewayCall(t, tt.method, tt.url, tt.token, tt.body)
		assert.Equal(t, tt.want, status, "%s: %s %s: %s", tt.name, tt.method, tt.url, body)
	}
}
