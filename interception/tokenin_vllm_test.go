package interception_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/trace"
)

// fizzScript is a model that reads a file with a tool, then answers; a
// Qwen3 model thinks before its call.
func fizzScript(f chattemplate.Family) []vllmtest.Entry {
	call := vllmtest.Turn{ToolCalls: []vllmtest.ToolCall{{Name: "bash", Arguments: json.RawMessage(`{"command": "cat fizzbuzz.py"}`)}}}
	if f.Name == chattemplate.Qwen3.Name {
		call.Reasoning = "Read the file first."
	}
	return []vllmtest.Entry{{Match: "fizzbuzz.py", Turns: []vllmtest.Turn{call, {Content: "Fixed: fizz now tests n % 3."}}}}
}

// vllmCall is a chat call's body as the SDK sends it: its messages and
// tools, for the upstream's /tokenize.
type vllmCall struct {
	Messages []json.RawMessage `json:"messages"`
	Tools    json.RawMessage   `json:"tools"`
}

func bodyOf(t *testing.T, p openai.ChatCompletionNewParams) vllmCall {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var c vllmCall
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

// askSDK is the SDK's answer to p, streamed (gathered by the SDK's
// accumulator) or not.
func askSDK(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	t.Helper()
	if !stream {
		answer, err := c.Chat.Completions.New(context.Background(), p)
		require.NoError(t, err)
		return *answer
	}
	s := c.Chat.Completions.NewStreaming(context.Background(), p)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	require.NoError(t, s.Err())
	return acc.ChatCompletion
}

// vllmConversation has the fizz conversation through a rollout of pool,
// streamed or not: a tool call, its result, the answer. The SDK sees the
// scripted answers.
func vllmConversation(t *testing.T, pool *interception.Pool, model string, r interception.Rollout, stream bool) ([]trace.Turn, [2]vllmCall) {
	t.Helper()
	s, err := pool.Acquire(context.Background(), r)
	require.NoError(t, err)
	c := openai.NewClient(optionsFor(s)...)
	p := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You fix the repository so that its tests pass. Use the tools."),
		openai.UserMessage("The test tests/test_fizz.py fails. Fix fizzbuzz.py.")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "bash", Description: openai.String("Run a shell command."),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}})}}
	var calls [2]vllmCall
	calls[0] = bodyOf(t, p)
	first := askSDK(t, c, p, stream)
	require.Len(t, first.Choices[0].Message.ToolCalls, 1)
	call := first.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "bash", call.Function.Name)
	assert.JSONEq(t, `{"command": "cat fizzbuzz.py"}`, call.Function.Arguments)
	assert.Equal(t, "tool_calls", first.Choices[0].FinishReason)

	p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("def fizz(n): ...", call.ID))
	calls[1] = bodyOf(t, p)
	second := askSDK(t, c, p, stream)
	assert.Equal(t, "Fixed: fizz now tests n % 3.", second.Choices[0].Message.Content)
	assert.Empty(t, second.Choices[0].Message.ToolCalls)

	turns, ok := s.Finish()
	require.True(t, ok)
	require.Len(t, turns, 2)
	return turns, calls
}

func tokenizeCall(t *testing.T, srv *vllmtest.Server, c vllmCall, n int, gen bool) []int32 {
	t.Helper()
	ids, err := srv.Tokenize(vllmtest.TokenizeRequest{Messages: c.Messages[:n], Tools: c.Tools, AddGenerationPrompt: gen})
	require.NoError(t, err)
	return ids
}

// Against vLLM serving each family's real chat template and tokenizer,
// through the interception, streamed or not: a turn's prompt ids are the upstream's
// /tokenize of the call's messages, and its completion ends with the
// family's end token. Every template re-renders the tool-calling turn
// otherwise than the model wrote it (Qwen3 drops its <think> block, Llama
// 3.1 and DeepSeek V3 their calls), so the later call's prompt, as text,
// does not extend what was sampled; with token-in it does, bridged by the
// family's end token to the template's own ids of the tool's result and
// the generation prompt.
func TestTokenInAgainstTheFamiliesRealTemplates(t *testing.T) {
	for _, f := range chattemplate.Families {
		t.Run(f.Name, func(t *testing.T) {
			srv := vllmtest.Start(t, vllmtest.Config{Family: f, Script: fizzScript(f)})
			pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(srv.BaseURL, "upstream-key")})
			t.Cleanup(func() { assert.NoError(t, pool.Close()) })

			text, calls := vllmConversation(t, pool, srv.Model, interception.Rollout{Key: "run/0/0/0", Model: srv.Model, Tokens: &dialects.TokenRequest{}}, false)
			for i, turn := range text {
				require.NotNil(t, turn.Tokens, "turn %d", i)
				assert.Equal(t, dialects.TokenIDs(tokenizeCall(t, srv, calls[i], len(calls[i].Messages), true)), turn.Tokens.PromptIDs, "turn %d: the upstream's /tokenize of its messages", i)
				assert.Equal(t, f.End[0], turn.Tokens.CompletionIDs[len(turn.Tokens.CompletionIDs)-1], "turn %d ends with the family's end token", i)
				assert.False(t, turn.TokenIn)
			}
			assert.False(t, extends(t, text[0], text[1]), "the template re-renders the tool-calling turn otherwise")

			in, _ := vllmConversation(t, pool, srv.Model, interception.Rollout{Key: "run/0/1/0", Model: srv.Model, TokenIn: true}, true)
			assert.Equal(t, text[0].Tokens.PromptIDs, in[0].Tokens.PromptIDs)
			assert.Equal(t, text[0].Tokens.CompletionIDs, in[0].Tokens.CompletionIDs, "the same answer, streamed")
			assert.True(t, in[1].TokenIn, "%s", in[1].TokenInText)
			assert.Equal(t, f.Name, in[1].TokenInBridge)
			assert.False(t, in[1].TokenInClosed)
			assert.True(t, extends(t, in[0], in[1]), "the later prompt extends what was sampled")

			head := tokenizeCall(t, srv, calls[1], len(calls[0].Messages)+1, false)
			full := tokenizeCall(t, srv, calls[1], len(calls[1].Messages), true)
			want, _, why := f.Bridge(sampledIDs(t, in[0]), head, full)
			require.Empty(t, why)
			assert.Equal(t, dialects.TokenIDs(want), in[1].Tokens.PromptIDs)
			tail := in[1].Tokens.PromptIDs[len(sampledIDs(t, in[0])):]
			assert.Equal(t, full[len(full)-len(tail):], []int32(tail), "the template's own ids of the tool's result and the generation prompt")
		})
	}
}
