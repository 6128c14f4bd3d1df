package vllmtest_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
)

// answer is a chat completion as the upstream sends it, or a stream's
// chunks gathered into one.
type answer struct {
	PromptTokenIDs []int32  `json:"prompt_token_ids"`
	Choices        []choice `json:"choices"`
	Usage          struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

type choice struct {
	Message      message `json:"message"`
	Delta        message `json:"delta"`
	FinishReason *string `json:"finish_reason"`
	TokenIDs     []int32 `json:"token_ids"`
	Logprobs     *struct {
		Content []logprob `json:"content"`
	} `json:"logprobs"`
}

type message struct {
	Content          *string    `json:"content"`
	ReasoningContent *string    `json:"reasoning_content"`
	ToolCalls        []toolCall `json:"tool_calls"`
}

type toolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type logprob struct {
	Token       string    `json:"token"`
	Logprob     float64   `json:"logprob"`
	TopLogprobs []logprob `json:"top_logprobs"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// post sends body to the upstream's path: the status and the answer's bytes.
func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// chat is the upstream's answer to a chat body at path, which must be 200.
func chat(t *testing.T, srv *vllmtest.Server, path string, body map[string]any) answer {
	t.Helper()
	status, data := post(t, srv.URL+path, body)
	require.Equal(t, http.StatusOK, status, "%s", data)
	var a answer
	require.NoError(t, json.Unmarshal(data, &a))
	require.Len(t, a.Choices, 1)
	return a
}

// stream is the upstream's streamed answer to body, its chunks gathered:
// texts joined, token ids and logprobs in order, tool calls as sent.
func stream(t *testing.T, srv *vllmtest.Server, body map[string]any) (answer, int) {
	t.Helper()
	body["stream"] = true
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(srv.BaseURL+"/chat/completions", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var out answer
	var got choice
	var content, reasoning strings.Builder
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		chunks++
		var c answer
		require.NoError(t, json.Unmarshal([]byte(data), &c))
		out.PromptTokenIDs = append(out.PromptTokenIDs, c.PromptTokenIDs...)
		for _, ch := range c.Choices {
			content.WriteString(str(ch.Delta.Content))
			reasoning.WriteString(str(ch.Delta.ReasoningContent))
			got.Message.ToolCalls = append(got.Message.ToolCalls, ch.Delta.ToolCalls...)
			got.TokenIDs = append(got.TokenIDs, ch.TokenIDs...)
			if ch.FinishReason != nil {
				got.FinishReason = ch.FinishReason
			}
		}
	}
	require.NoError(t, sc.Err())
	c, r := content.String(), reasoning.String()
	if c != "" {
		got.Message.Content = &c
	}
	if r != "" {
		got.Message.ReasoningContent = &r
	}
	out.Choices = []choice{got}
	return out, chunks
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

var bashTool = []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "description": "Run a shell command.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}}}

// Each family writes a tool call its own way, ending with its end token;
// vLLM's parsers read the call back, so a client sees the scripted call,
// streamed or not, and the stream's chunks carry the same ids.
func TestToolCallsAsEachFamilyWritesThem(t *testing.T) {
	for _, c := range []struct {
		family chattemplate.Family
		text   string
	}{
		{chattemplate.Qwen3, "<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls -a\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"pwd\"}}\n</tool_call><|im_end|>"},
		{chattemplate.Llama31, "{\"name\": \"bash\", \"parameters\": {\"command\": \"ls -a\"}}; {\"name\": \"bash\", \"parameters\": {\"command\": \"pwd\"}}<|eot_id|>"},
		{chattemplate.DeepSeekV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{\"command\": \"ls -a\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{\"command\": \"pwd\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"},
	} {
		t.Run(c.family.Name, func(t *testing.T) {
			srv := vllmtest.Start(t, vllmtest.Config{Family: c.family, Script: []vllmtest.Entry{{Match: "", Turns: []vllmtest.Turn{{ToolCalls: []vllmtest.ToolCall{
				{Name: "bash", Arguments: json.RawMessage(`{"command":"ls -a"}`)}, {Name: "bash", Arguments: json.RawMessage(`{"command":"pwd"}`)}}}}}}})
			body := func() map[string]any {
				return map[string]any{"messages": []any{user("List the files.")}, "tools": bashTool, "return_token_ids": true}
			}
			a := chat(t, srv, "/v1/chat/completions", body())
			ch := a.Choices[0]
			text, err := srv.Detokenize(ch.TokenIDs)
			require.NoError(t, err)
			assert.Equal(t, c.text, text)
			assert.Equal(t, c.family.End[0], ch.TokenIDs[len(ch.TokenIDs)-1], "ends with the family's end token")
			assert.Equal(t, "tool_calls", str(ch.FinishReason))
			assert.Nil(t, ch.Message.Content)
			require.Len(t, ch.Message.ToolCalls, 2)
			for i, args := range []string{`{"command": "ls -a"}`, `{"command": "pwd"}`} {
				assert.Equal(t, "bash", ch.Message.ToolCalls[i].Function.Name)
				assert.Equal(t, args, ch.Message.ToolCalls[i].Function.Arguments)
				assert.True(t, strings.HasPrefix(ch.Message.ToolCalls[i].ID, "chatcmpl-tool-"))
			}
			prompt, err := srv.Tokenize(vllmtest.TokenizeRequest{Messages: body()["messages"], Tools: bashTool, AddGenerationPrompt: true})
			require.NoError(t, err)
			assert.Equal(t, prompt, a.PromptTokenIDs, "the prompt is the template's render of the messages")

			s, chunks := stream(t, srv, body())
			assert.Equal(t, a.PromptTokenIDs, s.PromptTokenIDs)
			assert.Equal(t, ch.TokenIDs, s.Choices[0].TokenIDs, "the chunks carry the completion's ids")
			assert.Equal(t, len(ch.TokenIDs)+1, chunks, "a chunk a token, after the role's")
			assert.Equal(t, "tool_calls", str(s.Choices[0].FinishReason))
			require.Len(t, s.Choices[0].Message.ToolCalls, 2)
			assert.Equal(t, ch.Message.ToolCalls[1].Function, s.Choices[0].Message.ToolCalls[1].Function)
		})
	}
}

// Without tools in the request, vLLM runs no tool parser: a call the
// model writes is its content.
func TestNoToolsNoToolCalls(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Llama31, Script: []vllmtest.Entry{{Turns: []vllmtest.Turn{{ToolCalls: []vllmtest.ToolCall{
		{Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}}}}}}})
	a := chat(t, srv, "/v1/chat/completions", map[string]any{"messages": []any{user("List the files.")}})
	assert.Equal(t, `{"name": "bash", "parameters": {"command": "ls"}}`, str(a.Choices[0].Message.Content))
	assert.Empty(t, a.Choices[0].Message.ToolCalls)
	assert.Equal(t, "stop", str(a.Choices[0].FinishReason))
	assert.Nil(t, a.Choices[0].TokenIDs, "token ids only when asked")
	assert.Nil(t, a.PromptTokenIDs)
}

// Qwen3 reasons in a <think> block; the reasoning parser gives it apart
// from the content, streamed or not, and a stream's deltas hold the text
// as its tokens complete it.
func TestQwen3Reasoning(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Qwen3, Script: []vllmtest.Entry{{Match: "223", Turns: []vllmtest.Turn{
		{Reasoning: "sqrt(223) < 15; no divisor. Prime 🙂.", Content: "Yes, 223 is prime."}}}}})
	body := func() map[string]any {
		return map[string]any{"messages": []any{user("Is 223 prime?")}, "return_token_ids": true}
	}
	a := chat(t, srv, "/v1/chat/completions", body())
	m := a.Choices[0].Message
	assert.Equal(t, "sqrt(223) < 15; no divisor. Prime 🙂.", str(m.ReasoningContent))
	assert.Equal(t, "Yes, 223 is prime.", str(m.Content))
	text, err := srv.Detokenize(a.Choices[0].TokenIDs)
	require.NoError(t, err)
	assert.Equal(t, "<think>\nsqrt(223) < 15; no divisor. Prime 🙂.\n</think>\n\nYes, 223 is prime.<|im_end|>", text)

	s, _ := stream(t, srv, body())
	assert.Equal(t, m.ReasoningContent, s.Choices[0].Message.ReasoningContent)
	assert.Equal(t, m.Content, s.Choices[0].Message.Content)
	assert.Equal(t, a.Choices[0].TokenIDs, s.Choices[0].TokenIDs)

	// With thinking off the generation prompt holds an empty block: the
	// model answers at once, and a scripted reasoning cannot be.
	off := body()
	off["chat_template_kwargs"] = map[string]any{"enable_thinking": false}
	status, data := post(t, srv.BaseURL+"/chat/completions", off)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(data), "thinking off")
}

// max_tokens cuts the completion: no end token, finish_reason "length",
// the message what the parsers read of the cut text; a limit the
// completion fits in changes nothing.
func TestMaxTokensCutsTheCompletion(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Qwen3, Script: []vllmtest.Entry{{Turns: []vllmtest.Turn{{Content: "The answer is forty-two."}}}}})
	body := func(max int) map[string]any {
		b := map[string]any{"messages": []any{user("What is the answer?")}, "return_token_ids": true}
		if max > 0 {
			b["max_tokens"] = max
		}
		return b
	}
	whole := chat(t, srv, "/v1/chat/completions", body(0)).Choices[0]
	n := len(whole.TokenIDs)
	assert.Equal(t, chattemplate.Qwen3.End[0], whole.TokenIDs[n-1])

	fits := chat(t, srv, "/v1/chat/completions", body(n)).Choices[0]
	assert.Equal(t, whole.TokenIDs, fits.TokenIDs)
	assert.Equal(t, "stop", str(fits.FinishReason))

	cut := chat(t, srv, "/v1/chat/completions", body(n-1))
	assert.Equal(t, whole.TokenIDs[:n-1], cut.Choices[0].TokenIDs, "cut before the end token")
	assert.Equal(t, "length", str(cut.Choices[0].FinishReason))
	assert.Equal(t, "The answer is forty-two.", str(cut.Choices[0].Message.Content))
	assert.Equal(t, n-1, cut.Usage.CompletionTokens)

	early := chat(t, srv, "/v1/chat/completions", body(3)).Choices[0]
	assert.Equal(t, whole.TokenIDs[:3], early.TokenIDs)
	assert.Nil(t, early.Message.Content, "cut while thinking")
	s, _ := stream(t, srv, body(n-1))
	assert.Equal(t, "length", str(s.Choices[0].FinishReason))
	assert.Equal(t, whole.TokenIDs[:n-1], s.Choices[0].TokenIDs)
}

// logprobs give each completion token as text, with its alternatives,
// the sampled one first; the tokens' texts make the completion's text.
func TestLogprobs(t *testing.T) {
	srv := vllmtest.Start(t, vllmtest.Config{Family: chattemplate.Llama31, Script: []vllmtest.Entry{{Turns: []vllmtest.Turn{{Content: "Bonjour, ça va ?"}}}}})
	a := chat(t, srv, "/v1/chat/completions", map[string]any{"messages": []any{user("Say hello.")},
		"return_token_ids": true, "logprobs": true, "top_logprobs": 3})
	ch := a.Choices[0]
	require.NotNil(t, ch.Logprobs)
	require.Len(t, ch.Logprobs.Content, len(ch.TokenIDs))
	var text strings.Builder
	for i, lp := range ch.Logprobs.Content {
		text.WriteString(lp.Token)
		require.Len(t, lp.TopLogprobs, 3)
		assert.Equal(t, lp.Token, lp.TopLogprobs[0].Token)
		assert.Equal(t, lp.Logprob, lp.TopLogprobs[0].Logprob)
		assert.Negative(t, lp.Logprob, "position %d", i)
		assert.True(t, slices.IsSortedFunc(lp.TopLogprobs, func(a, b logprob) int { return cmp.Compare(b.Logprob, a.Logprob) }))
	}
	decoded, err := srv.Detokenize(ch.TokenIDs)
	require.NoError(t, err)
	assert.Equal(t, "Bonjour, ça va ?<|eot_id|>", decoded)
	assert.Equal(t, decoded, text.String(), "each token's text")
}
