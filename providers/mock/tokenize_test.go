package mock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
)

// postJSON posts body to url and decodes the JSON answer into out,
// returning the status.
func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.Unmarshal(data, out), string(data))
	return resp.StatusCode
}

type tokenized struct {
	Count       int     `json:"count"`
	MaxModelLen int     `json:"max_model_len"`
	Tokens      []int32 `json:"tokens"`
}

// calcConversation is a calculator calcConversation up to the tool's result:
// user, assistant calling the tool, tool.
var calcConversation = []map[string]any{
	{"role": "user", "content": "What is 2 + 3?"},
	{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "call_1", "type": "function",
		"function": map[string]any{"name": "calculator", "arguments": `{"expression":"2 + 3"}`}}}},
	{"role": "tool", "tool_call_id": "call_1", "content": "5"},
}

func TestTokenize(t *testing.T) {
	srv, _ := newServer(t, mock.Config{})
	for _, path := range []string{"/tokenize", "/v1/tokenize"} {
		var got tokenized
		require.Equal(t, http.StatusOK, postJSON(t, srv.URL+path, map[string]any{"model": "mock", "prompt": "héllo"}, &got))
		assert.Equal(t, []int32{'h', 'é', 'l', 'l', 'o'}, got.Tokens, path)
		assert.Equal(t, 5, got.Count)
		assert.Equal(t, mock.MaxModelLen, got.MaxModelLen)

		require.Equal(t, http.StatusOK, postJSON(t, srv.URL+path, map[string]any{"model": "mock", "messages": calcConversation,
			"add_generation_prompt": true, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "calculator"}}}}, &got))
		assert.Equal(t, mock.TokenIDs(`What is 2 + 3?calculator{"expression":"2 + 3"}5`), got.Tokens, path)
	}
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	assert.Equal(t, http.StatusBadRequest, postJSON(t, srv.URL+"/tokenize", map[string]any{"model": "mock"}, &e))
	assert.Contains(t, e.Error.Message, "messages or prompt")
}

// In merge mode an assistant message's letter pairs are one id each when
// a calcConversation is tokenized; other messages and plain prompts are not.
func TestTokenizeMerge(t *testing.T) {
	srv, _ := newServer(t, mock.Config{TokenMerge: true})
	var got tokenized
	require.Equal(t, http.StatusOK, postJSON(t, srv.URL+"/tokenize", map[string]any{"messages": calcConversation[:2]}, &got))
	want := mock.TokenIDs("What is 2 + 3?")
	assert.Equal(t, want, got.Tokens[:len(want)], "the user's message is one id per character")
	assistant := got.Tokens[len(want):]
	assert.Less(t, len(assistant), len(mock.TokenIDs(`calculator{"expression":"2 + 3"}`)), "letter pairs merged")
	assert.Equal(t, int32(0x110000+'c'<<8|'a'), assistant[0])
	assert.Equal(t, len(got.Tokens), got.Count)

	require.Equal(t, http.StatusOK, postJSON(t, srv.URL+"/tokenize", map[string]any{"prompt": "calculator"}, &got))
	assert.Equal(t, mock.TokenIDs("calculator"), got.Tokens, "a plain prompt is not a chat template's")
}

// tokenData is the token-level part of a chat answer.
type tokenData struct {
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	Choices        []struct {
		TokenIDs []int32 `json:"token_ids"`
		Message  struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

func tokensOf(t *testing.T, resp *openai.ChatCompletion) tokenData {
	t.Helper()
	var d tokenData
	require.NoError(t, json.Unmarshal([]byte(resp.RawJSON()), &d))
	require.Len(t, d.Choices, 1)
	return d
}

// The tokens route answers as chat completions does, with the given ids
// as the prompt's.
func TestChatCompletionsTokens(t *testing.T) {
	srv, client := newServer(t, mock.Config{TokenMerge: true})
	prompt := []int32{7, 8, 9}
	p := params(false, openai.UserMessage("What is 2 + 3?"))
	var viaTokens *openai.ChatCompletion
	err := client.Post(context.Background(), "chat/completions/tokens",
		map[string]any{"model": "mock", "messages": []map[string]any{{"role": "user", "content": "What is 2 + 3?"}},
			"return_token_ids": true, "tokens": prompt}, &viaTokens)
	require.NoError(t, err)
	plain, err := client.Chat.Completions.New(context.Background(), p, option.WithJSONSet("return_token_ids", true))
	require.NoError(t, err)

	got, want := tokensOf(t, viaTokens), tokensOf(t, plain)
	assert.Equal(t, prompt, got.PromptTokenIDs, "the prompt's ids are the given ones")
	assert.Equal(t, mock.TokenIDs("What is 2 + 3?"), want.PromptTokenIDs)
	assert.Equal(t, want.Choices[0].Message.Content, got.Choices[0].Message.Content, "the answer is the text route's")
	assert.Equal(t, want.Choices[0].TokenIDs, got.Choices[0].TokenIDs)

	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	assert.Equal(t, http.StatusBadRequest, postJSON(t, srv.URL+"/v1/chat/completions/tokens",
		map[string]any{"messages": []map[string]any{{"role": "user", "content": "hi"}}}, &e))
	assert.Contains(t, e.Error.Message, "tokens must be a non-empty array")
}

// Turn 2's prompt, as the mock re-tokenizes it, extends turn 1's prompt
// and completion ids without merge mode and does not with it.
func TestTokenMergeBreaksPrefix(t *testing.T) {
	for _, merge := range []bool{false, true} {
		_, client := newServer(t, mock.Config{TokenMerge: merge})
		ctx := context.Background()
		p := params(true, openai.UserMessage("What is 2 + 3?"))
		first, err := client.Chat.Completions.New(ctx, p, option.WithJSONSet("return_token_ids", true))
		require.NoError(t, err)
		require.Len(t, first.Choices[0].Message.ToolCalls, 1)
		call := first.Choices[0].Message.ToolCalls[0]
		p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("5", call.ID))
		second, err := client.Chat.Completions.New(ctx, p, option.WithJSONSet("return_token_ids", true))
		require.NoError(t, err)

		t1, t2 := tokensOf(t, first), tokensOf(t, second)
		require.NotEmpty(t, t1.Choices[0].TokenIDs)
		assert.Equal(t, mock.TokenIDs(call.Function.Name+call.Function.Arguments), t1.Choices[0].TokenIDs,
			"a completion is sampled one id per character")
		sampled := append(append([]int32{}, t1.PromptTokenIDs...), t1.Choices[0].TokenIDs...)
		extends := len(t2.PromptTokenIDs) > len(sampled) && slices.Equal(sampled, t2.PromptTokenIDs[:len(sampled)])
		assert.Equal(t, !merge, extends, "merge mode %v: whether turn 2's prompt extends turn 1's ids", merge)
	}
}
