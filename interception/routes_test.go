package interception_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception"
)

// TestModelsGet: both SDKs' Models.Get find a model the interception
// lists, in their own shape (a name with a slash too), and get a 404 in
// their own error shape for another.
func TestModelsGet(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the upstream got %s %s", r.Method, r.URL.Path)
	})
	f := newFixture(t, up.URL, nil)
	reg, err := f.pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/1/0", Model: "Qwen/Qwen3-8B"})
	require.NoError(t, err)
	ctx := context.Background()

	oc := openai.NewClient(optionsFor(reg)...)
	m, err := oc.Models.Get(ctx, "Qwen/Qwen3-8B")
	require.NoError(t, err)
	assert.Equal(t, "Qwen/Qwen3-8B", m.ID)
	assert.EqualValues(t, "model", m.Object)
	assert.Equal(t, "evalflow", m.OwnedBy)
	_, err = oc.Models.Get(ctx, "gpt-unlisted")
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, http.StatusNotFound, oerr.StatusCode)
	assert.Equal(t, "model_not_found", oerr.Code)
	assert.Contains(t, oerr.Message, "gpt-unlisted")

	ac := anthropic.NewClient(anthropicOptionsFor(reg)...)
	info, err := ac.Models.Get(ctx, "Qwen/Qwen3-8B", anthropic.ModelGetParams{})
	require.NoError(t, err)
	assert.Equal(t, "Qwen/Qwen3-8B", info.ID)
	assert.Equal(t, "Qwen/Qwen3-8B", info.DisplayName)
	assert.EqualValues(t, "model", info.Type)
	_, err = ac.Models.Get(ctx, "claude-unlisted", anthropic.ModelGetParams{})
	var aerr *anthropic.Error
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusNotFound, aerr.StatusCode)
	assert.EqualValues(t, "not_found_error", aerr.Type())

	stranger := anthropic.NewClient(aoption.WithBaseURL(reg.LocalURL), aoption.WithAPIKey("wrong"), aoption.WithMaxRetries(0))
	_, err = stranger.Models.Get(ctx, "Qwen/Qwen3-8B", anthropic.ModelGetParams{})
	require.ErrorAs(t, err, &aerr)
	assert.Equal(t, http.StatusUnauthorized, aerr.StatusCode, "a model is named to rollouts only")
}

// TestModelsGetThroughTheGateway: an agent whose base URL is its gateway
// rollout's finds the rollout's model with its SDK.
func TestModelsGetThroughTheGateway(t *testing.T) {
	g := newGatewayRig(t, 2)
	status, reg := g.register(t, "r1", `{"model":"Qwen/Qwen3-8B"}`)
	require.Equal(t, http.StatusOK, status)
	c := chatClient(reg)
	m, err := c.Models.Get(context.Background(), "Qwen/Qwen3-8B")
	require.NoError(t, err)
	assert.Equal(t, "Qwen/Qwen3-8B", m.ID)
	_, err = c.Models.Get(context.Background(), "other")
	var oerr *openai.Error
	require.ErrorAs(t, err, &oerr)
	assert.Equal(t, http.StatusNotFound, oerr.StatusCode)
}

// TestOtherMethods: on every route, a method the route's path does not
// take is a 405 whose Allow names the ones it takes, and OPTIONS is a 204
// with Allow and no body; neither needs a secret.
func TestOtherMethods(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), func(c *interception.Config) { c.GatewayToken = gatewayToken })
	allows := map[string]string{
		"/v1/chat/completions":         "POST, OPTIONS",
		"/v1/models":                   "GET, HEAD, OPTIONS",
		"/v1/models/{id}":              "GET, HEAD, OPTIONS",
		"/state":                       "GET, HEAD, PUT, PATCH, OPTIONS",
		"/v1/rollouts/{id}/trajectory": "GET, OPTIONS",
		"/v1/rollouts/{id}/register":   "POST, OPTIONS",
	}
	routes := interception.Routes()
	for _, rt := range routes {
		path := strings.ReplaceAll(rt.Path, "{id}", "r1")
		for _, method := range []string{http.MethodDelete, http.MethodOptions} {
			req, err := http.NewRequest(method, f.slot.LocalURL+path, nil)
			require.NoError(t, err)
			if rt.Gateway {
				req.Header.Set("Authorization", "Bearer "+gatewayToken)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			allow := resp.Header.Get("Allow")
			assert.Contains(t, allow, rt.Method, "%s %s", method, path)
			assert.Contains(t, allow, http.MethodOptions, "%s %s", method, path)
			if want, ok := allows[rt.Path]; ok {
				assert.Equal(t, want, allow, "%s %s", method, path)
			}
			if method == http.MethodOptions {
				assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%s %s", method, path)
				assert.Empty(t, body, "%s %s", method, path)
				continue
			}
			assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s: %s", method, path, body)
			assert.Contains(t, string(body), "not allowed", "%s %s", method, path)
		}
	}
	assert.Greater(t, len(routes), len(allows))
}
