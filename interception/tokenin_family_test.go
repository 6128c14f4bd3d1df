package interception_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/trace"
)

// qwen3Renders are transformers' renders of the "plain" conversation with
// Qwen3's chat template (internal/chattemplate/testdata/goldens): the ids
// of its first k messages, with the generation prompt or without.
func qwen3Renders(t *testing.T) map[string][]int32 {
	t.Helper()
	b, err := os.ReadFile("../internal/chattemplate/testdata/goldens/qwen3.json")
	require.NoError(t, err)
	var g struct {
		Renders []struct {
			Conversation string         `json:"conversation"`
			Args         string         `json:"args"`
			Content      string         `json:"content"`
			Kwargs       map[string]any `json:"kwargs"`
			K            int            `json:"k"`
			Gen          bool           `json:"add_generation_prompt"`
			IDs          []int32        `json:"ids"`
		} `json:"renders"`
	}
	require.NoError(t, json.Unmarshal(b, &g))
	out := map[string][]int32{}
	for _, r := range g.Renders {
		if r.Conversation == "plain" && r.Args == "string" && r.Content == "null" && len(r.Kwargs) == 0 {
			out[fmt.Sprintf("%d/%v", r.K, r.Gen)] = r.IDs
		}
	}
	return out
}

// qwen3Upstream is a vLLM whose chat template and tokenizer are Qwen3's,
// for the plain conversation: /tokenize answers transformers' ids, a chat
// call answers the conversation's next assistant message with the ids
// Qwen3 samples for it (its render as the last message, up to its end
// token; cut before it, at max_tokens, when truncate), and the tokens
// route records the prompt it was given.
func qwen3Upstream(t *testing.T, renders map[string][]int32, answers []string, prompts *[][]int32, truncate bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages            []json.RawMessage `json:"messages"`
			AddGenerationPrompt bool              `json:"add_generation_prompt"`
			Tokens              []int32           `json:"tokens"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		w.Header().Set("Content-Type", "application/json")
		k := len(req.Messages)
		if r.URL.Path == "/tokenize" {
			ids, ok := renders[fmt.Sprintf("%d/%v", k, req.AddGenerationPrompt)]
			require.True(t, ok, "a render of %d messages", k)
			require.NoError(t, json.NewEncoder(w).Encode(map[string]any{"count": len(ids), "max_model_len": 40960, "tokens": ids}))
			return
		}
		prompt := renders[fmt.Sprintf("%d/true", k)]
		if r.URL.Path == "/v1/chat/completions/tokens" {
			*prompts = append(*prompts, req.Tokens)
			prompt = req.Tokens
		}
		head := renders[fmt.Sprintf("%d/false", k+1)]
		completion := head[len(renders[fmt.Sprintf("%d/true", k)]) : len(head)-1] // up to <|im_end|>, without the "\n" after it
		finish := "stop"
		if truncate {
			completion, finish = completion[:len(completion)-1], "length"
		}
		require.NoError(t, json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "Qwen/Qwen3-8B",
			"prompt_token_ids": prompt,
			"choices": []map[string]any{{"index": 0, "finish_reason": finish, "token_ids": completion,
				"message": map[string]any{"role": "assistant", "content": answers[(k-1)/2]}}},
			"usage": map[string]any{"prompt_tokens": len(prompt), "completion_tokens": len(completion), "total_tokens": len(prompt) + len(completion)},
		}))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Qwen3's template renders the last assistant turn with an empty
// <think></think> block and drops it once the turn is history: its
// re-render of each later call does not extend what was sampled. Token-in
// bridges it by the family's end token: every later prompt is exactly the
// earlier turn's prompt and completion ids, then the template's own ids
// of the new messages and the generation prompt.
func TestTokenInBridgesQwen3sTemplate(t *testing.T) {
	renders := qwen3Renders(t)
	answers := []string{"17 * 23 = 391.", "391 / 7 = 55.857…, so 55.", "Cinquante-cinq 🙂  (55)."}
	var prompts [][]int32
	srv := qwen3Upstream(t, renders, answers, &prompts, false)
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.URL+"/v1", "upstream-key")})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	s, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", Model: "Qwen/Qwen3-8B", TokenIn: true})
	require.NoError(t, err)

	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: "Qwen/Qwen3-8B", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a careful assistant. Answer briefly."), openai.UserMessage("What is 17 * 23?")}}
	for _, next := range []string{"And divided by 7, rounded down?", "Say it in French, with an emoji 🙂 and  two spaces."} {
		answer, err := c.Chat.Completions.New(context.Background(), p)
		require.NoError(t, err)
		p.Messages = append(p.Messages, answer.Choices[0].Message.ToParam(), openai.UserMessage(next))
	}
	_, err = c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)

	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 3)
	require.Len(t, prompts, 2, "both later calls go in as tokens")
	for i := 1; i < 3; i++ {
		sampled := sampledIDs(t, turns[i-1])
		reRender := renders[fmt.Sprintf("%d/true", 2+2*i)]
		assert.False(t, slices.Equal(sampled, reRender[:len(sampled)]), "turn %d: the template's re-render breaks the prefix", i)
		assert.True(t, turns[i].TokenIn, "turn %d", i)
		assert.Equal(t, "qwen3", turns[i].TokenInBridge, "turn %d", i)
		assert.False(t, turns[i].TokenInClosed)
		assert.Equal(t, dialects.TokenIDs(prompts[i-1]), turns[i].Tokens.PromptIDs)
		assert.Equal(t, sampled, prompts[i-1][:len(sampled)], "turn %d extends what was sampled", i)
		// After it: "\n", the user's message and the generation prompt,
		// as the template renders them after the earlier turn.
		tail := prompts[i-1][len(sampled):]
		assert.Equal(t, reRender[len(reRender)-len(tail):], tail, "turn %d: the template's own ids of the new messages", i)
		assert.Equal(t, int32(198), tail[0], "the newline Qwen3 renders after <|im_end|>")
	}
}

// qwen3Conversation has two turns through s, the second extending the
// first: the turns recorded and the prompts the tokens route got.
func qwen3Conversation(t *testing.T, model string, truncate bool) ([]trace.Turn, [][]int32) {
	t.Helper()
	var prompts [][]int32
	srv := qwen3Upstream(t, qwen3Renders(t), []string{"17 * 23 = 391.", "391 / 7 = 55.857…, so 55."}, &prompts, truncate)
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.URL+"/v1", "upstream-key")})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	s, err := pool.Acquire(context.Background(), interception.Rollout{Key: "run/0/0/0", Model: model, TokenIn: true})
	require.NoError(t, err)
	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a careful assistant. Answer briefly."), openai.UserMessage("What is 17 * 23?")}}
	answer, err := c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	p.Messages = append(p.Messages, answer.Choices[0].Message.ToParam(), openai.UserMessage("And divided by 7, rounded down?"))
	_, err = c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2)
	return turns, prompts
}

// A turn cut at max_tokens has no end token: the bridge closes it with
// Qwen3's <|im_end|>, an id the model did not sample, and the turn says so.
func TestTokenInClosesATruncatedTurn(t *testing.T) {
	turns, prompts := qwen3Conversation(t, "Qwen/Qwen3-8B", true)
	require.Len(t, prompts, 1)
	sampled := sampledIDs(t, turns[0])
	assert.Equal(t, sampled, prompts[0][:len(sampled)])
	assert.Equal(t, []int32{151645, 198}, prompts[0][len(sampled):len(sampled)+2], "closed with <|im_end|>, then the template's newline")
	assert.True(t, turns[1].TokenIn)
	assert.True(t, turns[1].TokenInClosed)
}

// A model of no family the bridges know, whose template re-renders the
// earlier turn otherwise, goes as text; the turn says why, naming the
// model and the families bridged.
func TestTokenInOfAModelOfNoKnownFamilyGoesAsText(t *testing.T) {
	turns, prompts := qwen3Conversation(t, "org/custom-7b", false)
	assert.Empty(t, prompts)
	assert.False(t, turns[1].TokenIn)
	assert.Empty(t, turns[1].TokenInBridge)
	assert.Contains(t, turns[1].TokenInText, `no family's bridge is known for model "org/custom-7b" (bridged: qwen3, llama3.1, deepseek-v3)`)
}
