package interception_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// stateful is a fake provider of one dialect that issues reasoning state
// with every answer and, like the real APIs, refuses a request that brings
// the last turn's state back altered or not at all: Anthropic when thinking
// is on and the last tool-calling turn does not begin with the thinking
// block it signed; the Responses API when a reasoning item's
// encrypted_content is not the one it issued (and it returns
// encrypted_content only when asked to); an OpenRouter-style chat provider
// when reasoning_details do not come back.
type stateful struct {
	dialect string

	mu sync.Mutex
	// issued is the state of each answer, received the state each request
	// brought back from the answer before ("" for the first).
	issued, received []string
	// thinking records whether each request asked for reasoning.
	thinking []bool
	// rejected holds why requests were refused.
	rejected []string
}

func newStateful(t *testing.T, dialect string) (*stateful, string) {
	s := &stateful{dialect: dialect}
	srv := upstream(t, s.serve)
	return s, srv.URL + "/v1"
}

// The state the fake issues at turn n (from 1), with characters base64
// and JSON both care about.
func anthropicSig(n int) string      { return fmt.Sprintf("EqQBCkYIBxgC+/sig%d==", n) }
func anthropicRedacted(n int) string { return fmt.Sprintf("RED+/%d\"quoted\"==", n) }
func responsesEnc(n int) string      { return fmt.Sprintf("gAAAAB+enc/%d==", n) }
func chatDetails(n int) string {
	return fmt.Sprintf(`[{"type":"reasoning.encrypted","data":"opaque+/%d==","id":"rd_%d","format":"google-gemini-v1","index":0}]`, n, n)
}

func (s *stateful) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"bad json"}}`)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.issued) + 1
	var got, why string
	var answer string
	switch s.dialect {
	case dialects.NameAnthropic:
		got, why = s.anthropicCheck(body)
		answer = anthropicAnswer(n)
	case dialects.NameResponses:
		got, why = s.responsesCheck(body)
		answer = responsesAnswer(n, body)
	case dialects.NameChat:
		got, why = s.chatCheck(body)
		answer = chatAnswer(n)
	}
	// Anthropic without thinking takes a turn without its thinking block.
	optional := s.dialect == dialects.NameAnthropic && !s.thinking[len(s.thinking)-1] && got == ""
	if why == "" && n > 1 && got != s.issued[n-2] && !optional {
		why = fmt.Sprintf("reasoning state of turn %d came back as %q, want %q", n-1, got, s.issued[n-2])
	}
	if why != "" {
		s.rejected = append(s.rejected, why)
		if s.dialect == dialects.NameAnthropic {
			writeJSON(w, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":`+quote(why)+`}}`)
		} else {
			writeJSON(w, http.StatusBadRequest, `{"error":{"message":`+quote(why)+`,"type":"invalid_request_error","param":null,"code":"invalid_encrypted_content"}}`)
		}
		return
	}
	s.received = append(s.received, got)
	switch s.dialect {
	case dialects.NameAnthropic:
		s.issued = append(s.issued, anthropicSig(n)+"|"+anthropicRedacted(n))
	case dialects.NameResponses:
		s.issued = append(s.issued, responsesEnc(n))
	case dialects.NameChat:
		s.issued = append(s.issued, chatDetails(n))
	}
	if stream, _ := body["stream"].(bool); stream {
		writeStreamed(w, s.dialect, answer)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

// writeStreamed answers with answer as the dialect's own event stream, as
// a provider streams it.
func writeStreamed(w http.ResponseWriter, dialect, answer string) {
	d, err := dialects.ByName(dialect)
	if err != nil {
		panic(err)
	}
	resp, err := d.ParseResponse([]byte(answer))
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = d.WriteStream(w, resp)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// lastAssistant is the last assistant message of a chat or Anthropic body.
func lastAssistant(body map[string]any) map[string]any {
	msgs, _ := body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i].(map[string]any); m["role"] == "assistant" {
			return m
		}
	}
	return nil
}

func (s *stateful) anthropicCheck(body map[string]any) (got, why string) {
	th, _ := body["thinking"].(map[string]any)
	on := th != nil && th["type"] != "disabled"
	s.thinking = append(s.thinking, on)
	last := lastAssistant(body)
	if last == nil {
		return "", ""
	}
	blocks := last["content"].([]any)
	hasToolUse := false
	for _, b := range blocks {
		hasToolUse = hasToolUse || b.(map[string]any)["type"] == "tool_use"
	}
	first := blocks[0].(map[string]any)
	if first["type"] != "thinking" {
		if on && hasToolUse {
			return "", "messages: Expected `thinking` or `redacted_thinking`, but found `" + first["type"].(string) +
				"`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."
		}
		return "", ""
	}
	if len(blocks) < 2 || blocks[1].(map[string]any)["type"] != "redacted_thinking" {
		return "", "messages: the redacted_thinking block is missing"
	}
	sig, _ := first["signature"].(string)
	return sig + "|" + blocks[1].(map[string]any)["data"].(string), ""
}

func anthropicAnswer(n int) string {
	content := []any{
		map[string]any{"type": "thinking", "thinking": fmt.Sprintf("Step %d: multiply.", n), "signature": anthropicSig(n)},
		map[string]any{"type": "redacted_thinking", "data": anthropicRedacted(n)},
	}
	stop := "tool_use"
	if n < 3 {
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": "calculator",
			"input": map[string]any{"expression": fmt.Sprintf("step %d", n)}})
	} else {
		content = append(content, map[string]any{"type": "text", "text": "The answer is 629."})
		stop = "end_turn"
	}
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "claude-x",
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 5}})
	return string(b)
}

func (s *stateful) responsesCheck(body map[string]any) (got, why string) {
	s.thinking = append(s.thinking, body["reasoning"] != nil)
	input, _ := body["input"].([]any)
	n := len(s.issued) + 1
	for _, it := range input {
		item := it.(map[string]any)
		if item["type"] != "reasoning" {
			continue
		}
		id, _ := item["id"].(string)
		enc, _ := item["encrypted_content"].(string)
		var k int
		if _, err := fmt.Sscanf(id, "rs_up_%d", &k); err != nil || k < 1 || k >= n || enc != responsesEnc(k) {
			return "", fmt.Sprintf("The encrypted content for item %s could not be verified.", id)
		}
		got = enc
	}
	return got, ""
}

func responsesAnswer(n int, body map[string]any) string {
	reasoning := map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_up_%d", n),
		"summary": []any{map[string]any{"type": "summary_text", "text": fmt.Sprintf("Step %d: multiply.", n)}}}
	include, _ := body["include"].([]any)
	for _, v := range include {
		if v == "reasoning.encrypted_content" && body["store"] == false {
			reasoning["encrypted_content"] = responsesEnc(n)
		}
	}
	output := []any{reasoning}
	if n < 3 {
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n),
			"name": "calculator", "arguments": fmt.Sprintf(`{"expression":"step %d"}`, n), "status": "completed"})
	} else {
		output = append(output, map[string]any{"type": "message", "id": "msg_3", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "The answer is 629.", "annotations": []any{}}}})
	}
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1, "status": "completed",
		"model": "gpt-x", "output": output, "usage": map[string]int{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}})
	return string(b)
}

func (s *stateful) chatCheck(body map[string]any) (got, why string) {
	s.thinking = append(s.thinking, body["reasoning_effort"] != nil)
	last := lastAssistant(body)
	if last == nil {
		return "", ""
	}
	d, ok := last["reasoning_details"]
	if !ok {
		return "", "reasoning_details of the last assistant message are missing"
	}
	b, _ := json.Marshal(d)
	// Compare as the provider would, by value: a client may re-indent JSON.
	var want any
	_ = json.Unmarshal([]byte(chatDetails(len(s.issued))), &want)
	wantB, _ := json.Marshal(want)
	if string(b) == string(wantB) {
		return chatDetails(len(s.issued)), ""
	}
	return string(b), ""
}

func chatAnswer(n int) string {
	msg := map[string]any{"role": "assistant", "content": nil, "reasoning": fmt.Sprintf("Step %d: multiply.", n),
		"reasoning_details": json.RawMessage(chatDetails(n))}
	finish := "tool_calls"
	if n < 3 {
		msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_%d", n), "type": "function",
			"function": map[string]any{"name": "calculator", "arguments": fmt.Sprintf(`{"expression":"step %d"}`, n)}}}
	} else {
		msg["content"] = "The answer is 629."
		finish = "stop"
	}
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": "or-x",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	return string(b)
}

// A threeTurns drives one caller's official SDK through a conversation of
// two tool calls and an answer, echoing each answer as that SDK's users
// do, and returns the answer and the opaque reasoning fields it was given.
type threeTurns func(t *testing.T, f fixture, stream bool) (answer string, opaque []string)

func chatThreeTurns(t *testing.T, f fixture, stream bool) (string, []string) {
	c := f.client(f.slot.Secret)
	p := openai.ChatCompletionNewParams{
		Model:           "caller-model",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(question)},
		Tools:           []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "calculator", Parameters: calculatorParams})},
		ReasoningEffort: shared.ReasoningEffortHigh,
	}
	var opaque []string
	for turn := 1; ; turn++ {
		var msg openai.ChatCompletionMessage
		var details []json.RawMessage
		if !stream {
			got, err := c.Chat.Completions.New(context.Background(), p)
			require.NoError(t, err, "turn %d", turn)
			msg = got.Choices[0].Message
			require.NoError(t, json.Unmarshal([]byte(msg.JSON.ExtraFields["reasoning_details"].Raw()), &details), "turn %d: %s", turn, got.RawJSON())
		} else {
			s := c.Chat.Completions.NewStreaming(context.Background(), p)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				ch := s.Current()
				require.True(t, acc.AddChunk(ch))
				if len(ch.Choices) > 0 {
					if raw := ch.Choices[0].Delta.JSON.ExtraFields["reasoning_details"].Raw(); raw != "" {
						var part []json.RawMessage
						require.NoError(t, json.Unmarshal([]byte(raw), &part))
						details = append(details, part...)
					}
				}
			}
			require.NoError(t, s.Err(), "turn %d", turn)
			msg = acc.Choices[0].Message
		}
		require.NotEmpty(t, details, "turn %d: reasoning_details", turn)
		for _, d := range details {
			opaque = append(opaque, string(d))
		}
		if turn == 3 {
			return msg.Content, opaque
		}
		require.Len(t, msg.ToolCalls, 1, "turn %d", turn)
		asst := msg.ToAssistantMessageParam()
		all, err := json.Marshal(details)
		require.NoError(t, err)
		asst.SetExtraFields(map[string]any{"reasoning_details": json.RawMessage(all)})
		p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &asst},
			openai.ToolMessage("629", msg.ToolCalls[0].ID))
	}
}

func responsesThreeTurns(t *testing.T, f fixture, stream bool) (string, []string) {
	c := f.client(f.slot.Secret)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(question, responses.EasyInputMessageRoleUser)}
	p := responses.ResponseNewParams{
		Model:        "caller-model",
		Instructions: openai.String(system),
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "calculator", Parameters: calculatorParams, Strict: openai.Bool(false)}}},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh},
		Store:     openai.Bool(false),
		Include:   []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	}
	var opaque []string
	for turn := 1; ; turn++ {
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
		var got responses.Response
		if !stream {
			r, err := c.Responses.New(context.Background(), p)
			require.NoError(t, err, "turn %d", turn)
			got = *r
		} else {
			s := c.Responses.NewStreaming(context.Background(), p)
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.completed" {
					got = ev.Response
				}
			}
			require.NoError(t, s.Err(), "turn %d", turn)
		}
		var callID string
		for _, item := range got.Output {
			switch item.Type {
			case "reasoning":
				r := item.AsReasoning()
				if stream && r.EncryptedContent == "" && len(item.Summary) > 0 {
					// A chat provider streams its reasoning text before the
					// state that goes with it: the text is an item of its own.
					break
				}
				require.NotEmpty(t, r.EncryptedContent, "turn %d: encrypted_content", turn)
				opaque = append(opaque, r.EncryptedContent)
				var summary []responses.ResponseReasoningItemSummaryParam
				for _, s := range r.Summary {
					summary = append(summary, responses.ResponseReasoningItemSummaryParam{Text: s.Text})
				}
				in := responses.ResponseInputItemParamOfReasoning(r.ID, summary)
				in.OfReasoning.EncryptedContent = openai.String(r.EncryptedContent)
				input = append(input, in)
			case "function_call":
				fc := item.AsFunctionCall()
				callID = fc.CallID
				input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name))
			}
		}
		if turn == 3 {
			return got.OutputText(), opaque
		}
		require.NotEmpty(t, callID, "turn %d: %s", turn, got.RawJSON())
		out := responses.ResponseInputItemParamOfFunctionCallOutput("629")
		out.OfFunctionCallOutput.CallID = openai.String(callID)
		input = append(input, out)
	}
}

func anthropicThreeTurns(t *testing.T, f fixture, stream bool) (string, []string) {
	c := f.anthropic(f.slot.Secret)
	p := anthropic.MessageNewParams{
		Model:     "caller-model",
		MaxTokens: 8192,
		System:    []anthropic.TextBlockParam{{Text: system}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "calculator",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: calculatorParams["properties"], Required: []string{"expression"}}}}},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(4096),
	}
	var opaque []string
	for turn := 1; ; turn++ {
		var got anthropic.Message
		if !stream {
			r, err := c.Messages.New(context.Background(), p)
			require.NoError(t, err, "turn %d", turn)
			got = *r
		} else {
			s := c.Messages.NewStreaming(context.Background(), p)
			for s.Next() {
				require.NoError(t, got.Accumulate(s.Current()))
			}
			require.NoError(t, s.Err(), "turn %d", turn)
		}
		var id, answer string
		for _, b := range got.Content {
			switch b.Type {
			case "thinking":
				if stream && b.Signature == "" && b.Thinking != "" {
					// A chat provider streams its reasoning text before the
					// state that goes with it: the text is a block of its own.
					break
				}
				require.NotEmpty(t, b.Signature, "turn %d: signature", turn)
				opaque = append(opaque, b.Signature)
			case "tool_use":
				id = b.ID
			case "text":
				answer += b.Text
			}
		}
		if turn == 3 {
			return answer, opaque
		}
		require.NotEmpty(t, id, "turn %d: %s", turn, got.RawJSON())
		p.Messages = append(p.Messages, got.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, "629", false)))
	}
}

var threeTurnConversations = map[string]threeTurns{
	dialects.NameChat:      chatThreeTurns,
	dialects.NameResponses: responsesThreeTurns,
	dialects.NameAnthropic: anthropicThreeTurns,
}

// TestReasoningStateRoundTrips runs three turns with tools for every cross
// pairing, streamed and not, against upstreams that refuse reasoning state
// that does not come back as they issued it: turns 2 and 3 must be
// accepted with each turn's state returned byte for byte, reasoning on.
func TestReasoningStateRoundTrips(t *testing.T) {
	// wrapped is the prefix of the state a caller sees, by upstream.
	wrapped := map[string]string{
		dialects.NameAnthropic: "evalflow.anthropic.v1:",
		dialects.NameResponses: "evalflow.responses.v1:",
		dialects.NameChat:      "evalflow.chat.v1:",
	}
	for _, caller := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		for _, up := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
			if caller == up {
				continue
			}
			for _, stream := range []bool{false, true} {
				t.Run(caller+"→"+up+map[bool]string{false: "/json", true: "/sse"}[stream], func(t *testing.T) {
					fake, url := newStateful(t, up)
					f := dialectFixture(t, up, url, nil)
					answer, opaque := threeTurnConversations[caller](t, f, stream)
					assert.Equal(t, "The answer is 629.", answer)

					fake.mu.Lock()
					defer fake.mu.Unlock()
					assert.Empty(t, fake.rejected)
					require.Len(t, fake.issued, 3)
					assert.Equal(t, []string{"", fake.issued[0], fake.issued[1]}, fake.received,
						"each turn's state comes back byte for byte")
					assert.Equal(t, []bool{true, true, true}, fake.thinking, "reasoning stays on")

					require.NotEmpty(t, opaque)
					if caller != dialects.NameChat {
						for _, o := range opaque {
							assert.True(t, strings.HasPrefix(o, wrapped[up]), "%s carries %s state: %s", caller, up, o)
						}
						return
					}
					// A chat caller gets OpenRouter's reasoning_details.
					formats := map[string]string{dialects.NameAnthropic: "anthropic-claude-v1", dialects.NameResponses: "openai-responses-v1"}
					for _, o := range opaque {
						var d map[string]any
						require.NoError(t, json.Unmarshal([]byte(o), &d))
						assert.Equal(t, formats[up], d["format"], o)
					}
				})
			}
		}
	}
}

// TestThinkingOffWhenNotReturned has a chat caller echo its tool-calling
// turn without the reasoning_details it got from an Anthropic upstream:
// that request goes out without thinking, which Anthropic accepts, rather
// than in a shape it rejects.
func TestThinkingOffWhenNotReturned(t *testing.T) {
	fake, url := newStateful(t, dialects.NameAnthropic)
	f := dialectFixture(t, dialects.NameAnthropic, url, nil)
	c := f.client(f.slot.Secret)
	p := openai.ChatCompletionNewParams{
		Model:           "caller-model",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		Tools:           []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "calculator", Parameters: calculatorParams})},
		ReasoningEffort: shared.ReasoningEffortMedium,
	}
	first, err := c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	msg := first.Choices[0].Message
	require.Len(t, msg.ToolCalls, 1)
	p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage("629", msg.ToolCalls[0].ID))
	_, err = c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err, "the turn without its thinking block is accepted")

	fake.mu.Lock()
	defer fake.mu.Unlock()
	assert.Empty(t, fake.rejected)
	assert.Equal(t, []bool{true, false}, fake.thinking, "thinking is off for the request that lost its block")
}

// TestTranslatedFieldsReachUpstream checks, field by field, that what a
// caller asked for reaches an upstream of another dialect in its words.
func TestTranslatedFieldsReachUpstream(t *testing.T) {
	const chatTools = `"tools":[{"type":"function","function":{"name":"calculator","parameters":{"type":"object"}}}]`
	tests := []struct {
		name, caller, upstream, path, body string
		check                              func(t *testing.T, seen map[string]any)
	}{
		{
			name: "parallel_tool_calls false, chat to anthropic", caller: dialects.NameChat, upstream: dialects.NameAnthropic,
			path: "/v1/chat/completions", body: `{"model":"m","messages":[{"role":"user","content":"go"}],` + chatTools + `,"parallel_tool_calls":false}`,
			check: func(t *testing.T, seen map[string]any) {
				assert.Equal(t, map[string]any{"type": "auto", "disable_parallel_tool_use": true}, seen["tool_choice"])
			},
		},
		{
			name: "parallel_tool_calls false, responses to chat", caller: dialects.NameResponses, upstream: dialects.NameChat,
			path: "/v1/responses", body: `{"model":"m","input":"go","tools":[{"type":"function","name":"calculator"}],"parallel_tool_calls":false}`,
			check: func(t *testing.T, seen map[string]any) { assert.Equal(t, false, seen["parallel_tool_calls"]) },
		},
		{
			name: "disable_parallel_tool_use, anthropic to responses", caller: dialects.NameAnthropic, upstream: dialects.NameResponses,
			path: "/v1/messages", body: `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"go"}],` +
				`"tools":[{"name":"calculator","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			check: func(t *testing.T, seen map[string]any) {
				assert.Equal(t, false, seen["parallel_tool_calls"])
				assert.Equal(t, "required", seen["tool_choice"])
			},
		},
		{
			name: "reasoning_effort, chat to anthropic", caller: dialects.NameChat, upstream: dialects.NameAnthropic,
			path: "/v1/chat/completions", body: `{"model":"m","messages":[{"role":"user","content":"go"}],"reasoning_effort":"high"}`,
			check: func(t *testing.T, seen map[string]any) {
				assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(16384)}, seen["thinking"])
			},
		},
		{
			name: "adaptive thinking, anthropic to chat", caller: dialects.NameAnthropic, upstream: dialects.NameChat,
			path: "/v1/messages", body: `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"go"}],"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}}`,
			check: func(t *testing.T, seen map[string]any) { assert.Equal(t, "low", seen["reasoning_effort"]) },
		},
		{
			name: "store and include, anthropic thinking to responses", caller: dialects.NameAnthropic, upstream: dialects.NameResponses,
			path: "/v1/messages", body: `{"model":"m","max_tokens":9000,"messages":[{"role":"user","content":"go"}],"thinking":{"type":"enabled","budget_tokens":8000}}`,
			check: func(t *testing.T, seen map[string]any) {
				assert.Equal(t, false, seen["store"])
				assert.Equal(t, []any{"reasoning.encrypted_content"}, seen["include"])
				assert.Equal(t, map[string]any{"effort": "medium", "summary": "auto"}, seen["reasoning"])
			},
		},
		{
			name: "stop_sequences, anthropic to chat", caller: dialects.NameAnthropic, upstream: dialects.NameChat,
			path: "/v1/messages", body: `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"go"}],"stop_sequences":["END"]}`,
			check: func(t *testing.T, seen map[string]any) { assert.Equal(t, []any{"END"}, seen["stop"]) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, seen := postTranslated(t, tt.upstream, tt.path, tt.body, tt.caller == dialects.NameAnthropic)
			tt.check(t, seen)
		})
	}
}

// TestTranslateRefusals: what an upstream's dialect cannot carry is
// refused with a 400 in the caller's error shape, the upstream uncalled.
func TestTranslateRefusals(t *testing.T) {
	tests := []struct {
		name, caller, upstream, path, body, want string
	}{
		{"chat stop to responses", dialects.NameChat, dialects.NameResponses, "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"go"}],"stop":["Observation:"]}`, "Responses API has no stop field"},
		{"anthropic stop_sequences to responses", dialects.NameAnthropic, dialects.NameResponses, "/v1/messages",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"}],"stop_sequences":["END"]}`, "Responses API has no stop field"},
		{"unknown effort to anthropic", dialects.NameResponses, dialects.NameAnthropic, "/v1/responses",
			`{"model":"m","input":"go","reasoning":{"effort":"ultra"}}`, `reasoning.effort cannot be sent: \"ultra\" is no effort Anthropic takes`},
		{"previous_response_id to chat", dialects.NameResponses, dialects.NameChat, "/v1/responses",
			`{"model":"m","input":"go","previous_response_id":"resp_1"}`, "previous_response_id cannot be sent"},
		{"unreadable carried state", dialects.NameAnthropic, dialects.NameChat, "/v1/messages",
			`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"evalflow.chat.v1:!!"}]},{"role":"user","content":"go"}]}`,
			"not base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
			f := dialectFixture(t, tt.upstream, up.URL+"/v1", nil)
			resp, body := f.post(t, tt.path, tt.body, tt.caller == dialects.NameAnthropic)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Contains(t, body, tt.want)
			if tt.caller == dialects.NameAnthropic {
				assert.JSONEq(t, `"invalid_request_error"`, mustField(t, body, "error", "type"), body)
				assert.JSONEq(t, `"error"`, mustField(t, body, "type"), body)
			} else {
				assert.NotEmpty(t, mustField(t, body, "error", "message"), body)
			}
			assert.Zero(t, calls.Load(), "the upstream is not called")
		})
	}
}

// mustField is the JSON at path in body.
func mustField(t *testing.T, body string, path ...string) string {
	t.Helper()
	raw := json.RawMessage(body)
	for _, p := range path {
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &obj), body)
		raw = obj[p]
	}
	return string(raw)
}
