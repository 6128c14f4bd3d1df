package rig_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"example.com/rig"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
)

// TestRigRecordsATurn: a module of its own starts the interception server,
// an OpenAI SDK client calls through it, the server records the turn with
// the model the rollout was registered with.
func TestRigRecordsATurn(t *testing.T) {
	_, upstream := mocktest.Serve(t, mock.Config{})
	srv, secret, err := rig.Start(upstream, "upstream-key", "rig/0/0/0", "mock")
	require.NoError(t, err)
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.LocalURL()+"/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "anything",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")},
	})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Choices)

	turns, ok := srv.Finish("rig/0/0/0")
	require.True(t, ok)
	require.Len(t, turns, 1)
	assert.Equal(t, "mock", turns[0].Request.Model, "the rollout's model, not the caller's")
	assert.Equal(t, 200, turns[0].Status)
}
