package dialects_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// TestSettingsMapping is the table of the settings besides messages,
// tools and reasoning, across dialects: what each becomes upstream.
func TestSettingsMapping(t *testing.T) {
	const schema = `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	tests := []wireCase{
		{dialects.Chat, `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"a","strict":true,"schema":` + schema + `}}}`,
			dialects.Responses, "text", `{"format":{"type":"json_schema","name":"a","strict":true,"schema":` + schema + `}}`},
		{dialects.Chat, `{"messages":[],"response_format":{"type":"json_object"}}`, dialects.Responses, "text", `{"format":{"type":"json_object"}}`},
		{dialects.Responses, `{"input":[],"text":{"format":{"type":"json_schema","name":"a","description":"d","schema":` + schema + `}}}`,
			dialects.Chat, "response_format", `{"type":"json_schema","json_schema":{"name":"a","description":"d","schema":` + schema + `}}`},
		{dialects.Chat, `{"model":"claude-sonnet-4-5","messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":` + schema + `}}}`,
			dialects.Anthropic, "output_config", `{"format":{"type":"json_schema","schema":` + schema + `}}`},
		{dialects.Anthropic, `{"messages":[],"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}}`,
			dialects.Chat, "response_format", `{"type":"json_schema","json_schema":{"name":"response","strict":true,"schema":` + schema + `}}`},
		{dialects.Anthropic, `{"messages":[],"output_format":{"type":"json_schema","schema":` + schema + `}}`,
			dialects.Responses, "text", `{"format":{"type":"json_schema","name":"response","strict":true,"schema":` + schema + `}}`},
		{dialects.Chat, `{"messages":[],"logprobs":true,"top_logprobs":2}`, dialects.Responses, "include", `["message.output_text.logprobs"]`},
		{dialects.Chat, `{"messages":[],"logprobs":true,"top_logprobs":2}`, dialects.Responses, "top_logprobs", `2`},
		{dialects.Responses, `{"input":[],"include":["message.output_text.logprobs"],"top_logprobs":4}`, dialects.Chat, "logprobs", `true`},
		{dialects.Responses, `{"input":[],"include":["message.output_text.logprobs"],"top_logprobs":4}`, dialects.Chat, "top_logprobs", `4`},
		{dialects.Chat, `{"messages":[],"user":"u-1"}`, dialects.Anthropic, "metadata", `{"user_id":"u-1"}`},
		{dialects.Chat, `{"messages":[],"user":"u-1","metadata":{"k":"v"}}`, dialects.Responses, "user", `"u-1"`},
		{dialects.Chat, `{"messages":[],"user":"u-1","metadata":{"k":"v"}}`, dialects.Responses, "metadata", `{"k":"v"}`},
		{dialects.Responses, `{"input":[],"user":"u-2","metadata":{"k":"v"}}`, dialects.Chat, "metadata", `{"k":"v"}`},
		{dialects.Anthropic, `{"messages":[],"metadata":{"user_id":"u-3"}}`, dialects.Chat, "user", `"u-3"`},
		{dialects.Anthropic, `{"messages":[],"metadata":{"user_id":"u-3"}}`, dialects.Responses, "user", `"u-3"`},
		{dialects.Chat, `{"messages":[],"service_tier":"flex"}`, dialects.Responses, "service_tier", `"flex"`},
		{dialects.Responses, `{"input":[],"service_tier":"priority"}`, dialects.Chat, "service_tier", `"priority"`},
		{dialects.Chat, `{"messages":[],"service_tier":"default"}`, dialects.Anthropic, "service_tier", `"standard_only"`},
		{dialects.Responses, `{"input":[],"service_tier":"auto"}`, dialects.Anthropic, "service_tier", `"auto"`},
		{dialects.Anthropic, `{"messages":[],"service_tier":"standard_only"}`, dialects.Chat, "service_tier", `"default"`},
		{dialects.Chat, `{"messages":[],"n":1}`, dialects.Anthropic, "n", ``},
	}
	checkWireFields(t, tests)
}

// TestLongUserIDsFitOpenAI: an end user's id longer than OpenAI's 64
// characters (claude-code's) reaches an OpenAI upstream as its SHA-256, the
// same id as the same user; a short one as it is.
func TestLongUserIDsFitOpenAI(t *testing.T) {
	long := "user_" + strings.Repeat("ab12", 16) + "_account__session_0f7c2d4e-9a1b-4c3d-8e5f-6a7b8c9d0e1f"
	sum := sha256.Sum256([]byte(long))
	for _, to := range []dialects.Dialect{dialects.Chat, dialects.Responses} {
		req, err := dialects.Anthropic.ParseRequest([]byte(`{"messages":[],"metadata":{"user_id":"` + long + `"}}`))
		require.NoError(t, err)
		assert.JSONEq(t, `"`+hex.EncodeToString(sum[:])+`"`, wireField(t, to, req, "user"), "%s user of a long id", to.Name())
		req.User = "u-1"
		assert.JSONEq(t, `"u-1"`, wireField(t, to, req, "user"), "%s user of a short id", to.Name())
	}
}

// TestSettingsRefusedByName: a setting the upstream has no field for is
// refused, named as the caller named it.
func TestSettingsRefusedByName(t *testing.T) {
	tests := []struct {
		from         dialects.Dialect
		body         string
		to           dialects.Dialect
		field, cause string
	}{
		{dialects.Chat, `{"messages":[],"n":2}`, dialects.Anthropic, "n", "2 choices were asked for"},
		{dialects.Chat, `{"messages":[],"n":3}`, dialects.Responses, "n", "the Responses API answers with one"},
		{dialects.Chat, `{"messages":[],"logprobs":true}`, dialects.Anthropic, "logprobs", "Anthropic returns no log probabilities"},
		{dialects.Chat, `{"messages":[],"top_logprobs":2}`, dialects.Anthropic, "top_logprobs", "Anthropic returns no log probabilities"},
		{dialects.Responses, `{"input":[],"include":["message.output_text.logprobs"]}`, dialects.Anthropic, `include "message.output_text.logprobs"`, "no log probabilities"},
		{dialects.Chat, `{"messages":[],"metadata":{"k":"v"}}`, dialects.Anthropic, "metadata", "holds only user_id"},
		{dialects.Responses, `{"input":[],"service_tier":"flex"}`, dialects.Anthropic, "service_tier", `"flex" has no Anthropic service tier`},
		{dialects.Chat, `{"messages":[],"response_format":{"type":"json_object"}}`, dialects.Anthropic, "response_format", "Anthropic has no json_object output"},
		{dialects.Responses, `{"model":"claude-opus-4-1","input":[],"text":{"format":{"type":"json_schema","name":"a","schema":{}}}}`, dialects.Anthropic,
			"text.format", "claude-opus-4-1 takes no structured output"},
		{dialects.Anthropic, `{"messages":[],"stop_sequences":["END"]}`, dialects.Responses, "stop_sequences", "the Responses API has no stop field"},
		{dialects.Responses, `{"input":[],"previous_response_id":"resp_1"}`, dialects.Anthropic, "previous_response_id", "only a Responses upstream keeps responses"},
	}
	for _, tt := range tests {
		req, err := tt.from.ParseRequest([]byte(tt.body))
		require.NoError(t, err)
		_, err = tt.to.EncodeRequest(req)
		var fe *dialects.FieldError
		require.ErrorAs(t, err, &fe, "%s(%s) → %s", tt.from.Name(), tt.body, tt.to.Name())
		assert.Equal(t, tt.field, fe.Field, "%s(%s) → %s", tt.from.Name(), tt.body, tt.to.Name())
		assert.ErrorContains(t, err, tt.cause)
	}
}

func TestClaudeTraitsOf(t *testing.T) {
	budget, formats, adaptive := dialects.ClaudeTraits{}, dialects.ClaudeTraits{StructuredOutputs: true},
		dialects.ClaudeTraits{AdaptiveThinking: true, StructuredOutputs: true}
	tests := []struct {
		model string
		want  dialects.ClaudeTraits
	}{
		{"claude-3-7-sonnet-20250219", budget},
		{"claude-sonnet-4-20250514", budget},
		{"claude-opus-4-1-20250805", budget},
		{"claude-sonnet-4-5", formats},
		{"claude-haiku-4-5@20251001", formats},
		{"us.anthropic.claude-opus-4-5-20251101-v1:0", formats},
		{"claude-opus-4-6", adaptive},
		{"anthropic.claude-sonnet-4-6", adaptive},
		{"anthropic/claude-opus-4.7", adaptive},
		{"claude-opus-5", adaptive},
		{"claude-mythos-preview", adaptive},
		{"gpt-4.1", budget},
		{"my-proxy-alias", budget},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, dialects.ClaudeTraitsOf(tt.model), "ClaudeTraitsOf(%q)", tt.model)
	}
}

// TestChatStreamUsageOnlyWhenAsked: a chat caller's stream ends with a
// chunk of usage and no choices when it asked for usage, and has no usage
// at all otherwise.
func TestChatStreamUsageOnlyWhenAsked(t *testing.T) {
	answer := dialects.Response{ID: "c1", Model: "m", FinishReason: dialects.FinishStop,
		Message: dialects.Message{Role: dialects.RoleAssistant, Content: []dialects.Part{{Type: dialects.PartText, Text: "hi"}}},
		Usage:   dialects.Usage{InputTokens: 3, OutputTokens: 2}}
	for _, asked := range []bool{false, true} {
		var out bytes.Buffer
		require.NoError(t, dialects.WriteStreamFor(dialects.Chat, &out, dialects.Request{StreamUsage: asked}, answer))
		events := sseData(t, out.Bytes())
		require.Equal(t, "[DONE]", string(events[len(events)-1]))
		var withUsage []map[string]json.RawMessage
		for _, data := range events[:len(events)-1] {
			var chunk map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(data, &chunk))
			if u, ok := chunk["usage"]; ok && string(u) != "null" {
				withUsage = append(withUsage, chunk)
			}
		}
		if !asked {
			assert.Empty(t, withUsage, "no usage when not asked")
			continue
		}
		require.Len(t, withUsage, 1)
		assert.JSONEq(t, `[]`, string(withUsage[0]["choices"]), "usage comes on a chunk of its own")
		assert.JSONEq(t, `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`, string(withUsage[0]["usage"]))
		last := events[len(events)-2]
		assert.Contains(t, string(last), `"usage"`, "the usage chunk is the last")
	}
}

// TestLogprobsReachTheCaller: an upstream's log probabilities reach a
// caller of the other OpenAI dialect that asked for them, whole or
// streamed, and one that did not ask gets none.
func TestLogprobsReachTheCaller(t *testing.T) {
	want := []dialects.TokenLogprob{
		{Token: "4", Logprob: -0.01, Bytes: []int{52}, Top: []dialects.TopLogprob{{Token: "4", Logprob: -0.01}, {Token: "four", Logprob: -4.7}}},
		{Token: ".", Logprob: -0.2, Top: []dialects.TopLogprob{}},
	}
	chatBody := `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"4."},"finish_reason":"stop",` +
		`"logprobs":{"content":[{"token":"4","logprob":-0.01,"bytes":[52],"top_logprobs":[{"token":"4","logprob":-0.01},{"token":"four","logprob":-4.7}]},` +
		`{"token":".","logprob":-0.2,"top_logprobs":[]}],"refusal":null}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	fromChat, err := dialects.Chat.ParseResponse([]byte(chatBody))
	require.NoError(t, err)
	assert.Equal(t, want, fromChat.Logprobs)

	// Whole: chat's to a Responses caller and back.
	out, err := dialects.Responses.EncodeResponse(fromChat)
	require.NoError(t, err)
	var r responses.Response
	require.NoError(t, json.Unmarshal(out, &r))
	require.Len(t, r.Output, 1)
	lp := r.Output[0].Content[0].Logprobs
	require.Len(t, lp, 2)
	assert.Equal(t, "four", lp[0].TopLogprobs[1].Token)
	back, err := dialects.Responses.ParseResponse(out)
	require.NoError(t, err)
	assert.Equal(t, want, back.Logprobs)
	out, err = dialects.Chat.EncodeResponse(back)
	require.NoError(t, err)
	var c openai.ChatCompletion
	require.NoError(t, json.Unmarshal(out, &c))
	require.Len(t, c.Choices[0].Logprobs.Content, 2)
	assert.InDelta(t, -4.7, c.Choices[0].Logprobs.Content[0].TopLogprobs[1].Logprob, 1e-9)

	// Streamed, event by event: Responses' to a chat caller that asked,
	// and to one that did not.
	var sse bytes.Buffer
	require.NoError(t, dialects.Responses.WriteStream(&sse, back))
	for _, asked := range []bool{true, false} {
		stream := dialects.Responses.NewStream()
		var chunks bytes.Buffer
		sw := dialects.StreamWriterFor(dialects.Chat, &chunks, dialects.Request{Logprobs: asked})
		for _, data := range sseData(t, sse.Bytes()) {
			require.NoError(t, stream.Add(data))
			for _, ev := range stream.Events() {
				require.NoError(t, sw.Emit(ev))
			}
		}
		require.NoError(t, sw.Emit(dialects.Event{Type: dialects.EventFinish, Response: stream.Response()}))
		var acc openai.ChatCompletionAccumulator
		for _, data := range sseData(t, chunks.Bytes()) {
			if string(data) == "[DONE]" {
				continue
			}
			var ch openai.ChatCompletionChunk
			require.NoError(t, json.Unmarshal(data, &ch))
			require.True(t, acc.AddChunk(ch))
		}
		require.Len(t, acc.Choices, 1)
		if !asked {
			assert.Empty(t, acc.Choices[0].Logprobs.Content, "not asked, none sent")
			continue
		}
		require.Len(t, acc.Choices[0].Logprobs.Content, 2, "asked")
		assert.Equal(t, ".", acc.Choices[0].Logprobs.Content[1].Token)
	}
}
