package interception_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// post sends a raw request to the interception server with the slot's
// secret in the dialect's carrier.
func (f fixture) post(t *testing.T, path, body string, anthropicCarrier bool) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.slot.LocalURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if anthropicCarrier {
		req.Header.Set("X-Api-Key", f.slot.Secret)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("Anthropic-Beta", "interleaved-thinking-2025-05-14")
	} else {
		req.Header.Set("Authorization", "Bearer "+f.slot.Secret)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

const anthropicMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hm","signature":"sig-keep"},{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2},"x_new_field":{"a":[1,2]}}`

const responsesObject = `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-x","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5},"x_new_field":{"a":[1,2]}}`

// TestRelayByteExact checks, per dialect, that the relay arm changes only the
// model and the run's sampling fields of the request, forwards the headers
// describing it with the upstream's own auth, and hands the answer back
// byte for byte.
func TestRelayByteExact(t *testing.T) {
	tests := []struct {
		dialect, path, body, want, answer string
		anthropicCarrier                  bool
	}{
		{
			dialect: dialects.NameAnthropic, path: "/v1/messages", anthropicCarrier: true,
			body: `{"model": "claude-x", "max_tokens": 100, "system": [{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],` +
				` "messages": [{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"SIG=="}]}], "x_unknown": {"k": "v\u00e9"}, "temperature": 1}`,
			want: `{"model": "run-model", "max_tokens": 100, "system": [{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],` +
				` "messages": [{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"SIG=="}]}], "x_unknown": {"k": "v\u00e9"}, "temperature": 0.25}`,
			answer: anthropicMessage,
		},
		{
			dialect: dialects.NameResponses, path: "/v1/responses",
			body:   `{"model":"gpt-x","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"ENC"}],"x_unknown":[1],"max_output_tokens":10}`,
			want:   `{"model":"run-model","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"ENC"}],"x_unknown":[1],"max_output_tokens":10,"temperature":0.25}`,
			answer: responsesObject,
		},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			var seen []byte
			var header http.Header
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				seen, _ = io.ReadAll(r.Body)
				header = r.Header.Clone()
				w.Header().Set("Request-Id", "req-7")
				writeJSON(w, http.StatusOK, tt.answer)
			})
			f := dialectFixture(t, tt.dialect, up.URL+"/v1", nil)
			resp, got := f.post(t, tt.path, tt.body, tt.anthropicCarrier)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tt.want, string(seen), "body the upstream saw")
			assert.Equal(t, tt.answer, got, "body the caller got")
			assert.Equal(t, "req-7", resp.Header.Get("Request-Id"))
			if tt.anthropicCarrier {
				assert.Equal(t, "upstream-key", header.Get("X-Api-Key"))
				assert.Empty(t, header.Get("Authorization"))
				assert.Equal(t, "interleaved-thinking-2025-05-14", header.Get("Anthropic-Beta"))
				assert.Equal(t, "2023-06-01", header.Get("Anthropic-Version"))
			} else {
				assert.Equal(t, "Bearer upstream-key", header.Get("Authorization"))
			}
			assert.Equal(t, []string{"application/json"}, header.Values("Content-Type"), "one content type")
			assert.NotContains(t, string(seen), f.slot.Secret)
			turn := f.turn(t)
			assert.Equal(t, "hi", turn.Response.Message.Text())
			assert.Empty(t, turn.Error)
		})
	}
}

// TestTranslateEdgeCases sends awkward requests across dialects and checks
// what the upstream received.
func TestTranslateEdgeCases(t *testing.T) {
	tests := []struct {
		name, caller, upstream, path, body string
		anthropicCarrier                   bool
		check                              func(t *testing.T, seen map[string]any)
	}{
		{
			name: "system in the middle, to anthropic", caller: dialects.NameChat, upstream: dialects.NameAnthropic,
			path: "/v1/chat/completions",
			body: `{"model":"m","messages":[{"role":"system","content":"one"},{"role":"user","content":"hi"},{"role":"system","content":"two"},{"role":"user","content":"again"}]}`,
			check: func(t *testing.T, seen map[string]any) {
				sys := seen["system"].([]any)
				require.Len(t, sys, 2, "both system messages reach the system field")
				assert.Equal(t, "two", sys[1].(map[string]any)["text"])
				msgs := seen["messages"].([]any)
				require.Len(t, msgs, 1, "the user turns around it merge")
				assert.Len(t, msgs[0].(map[string]any)["content"], 2)
				assert.EqualValues(t, 4096, seen["max_tokens"], "Anthropic requires max_tokens")
			},
		},
		{
			name: "system in the middle, to responses", caller: dialects.NameChat, upstream: dialects.NameResponses,
			path: "/v1/chat/completions",
			body: `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"system","content":"two"},{"role":"user","content":"again"}]}`,
			check: func(t *testing.T, seen map[string]any) {
				input := seen["input"].([]any)
				require.Len(t, input, 3)
				assert.Equal(t, "system", input[1].(map[string]any)["role"], "kept in place")
			},
		},
		{
			name: "anthropic without max_tokens, to chat", caller: dialects.NameAnthropic, upstream: dialects.NameChat,
			path: "/v1/messages", anthropicCarrier: true,
			body: `{"model":"m","system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":"hi"}]}`,
			check: func(t *testing.T, seen map[string]any) {
				assert.NotContains(t, seen, "max_tokens")
				msgs := seen["messages"].([]any)
				assert.Equal(t, "ab", msgs[0].(map[string]any)["content"], "several system blocks join")
			},
		},
		{
			name: "empty tool arguments and parallel calls, to anthropic", caller: dialects.NameResponses, upstream: dialects.NameAnthropic,
			path: "/v1/responses",
			body: `{"model":"m","input":[{"role":"user","content":"go"},{"type":"function_call","call_id":"c1","name":"a","arguments":""},` +
				`{"type":"function_call","call_id":"c2","name":"b","arguments":"{\"x\":1}"},{"type":"function_call_output","call_id":"c1","output":"1"},` +
				`{"type":"function_call_output","call_id":"c2","output":"2"},{"type":"message","role":"user"}]}`,
			check: func(t *testing.T, seen map[string]any) {
				msgs := seen["messages"].([]any)
				require.Len(t, msgs, 3, "user, assistant with both calls, user with both results")
				calls := msgs[1].(map[string]any)["content"].([]any)
				require.Len(t, calls, 2)
				assert.Equal(t, map[string]any{}, calls[0].(map[string]any)["input"], "empty arguments are {}")
				results := msgs[2].(map[string]any)["content"].([]any)
				assert.Len(t, results, 2)
			},
		},
		{
			name: "thinking next to tool calls, to responses", caller: dialects.NameAnthropic, upstream: dialects.NameResponses,
			path: "/v1/messages", anthropicCarrier: true,
			body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[` +
				`{"type":"thinking","thinking":"t","signature":"S"},{"type":"tool_use","id":"tu","name":"a","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu","content":"1"}]}]}`,
			check: func(t *testing.T, seen map[string]any) {
				input := seen["input"].([]any)
				require.Len(t, input, 3, "an Anthropic signature cannot be a Responses reasoning item")
				assert.Equal(t, "function_call", input[1].(map[string]any)["type"])
				assert.Equal(t, "{}", input[1].(map[string]any)["arguments"])
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, seen := postTranslated(t, tt.upstream, tt.path, tt.body, tt.anthropicCarrier)
			tt.check(t, seen)
			turn := f.turn(t)
			assert.Equal(t, tt.caller, turn.Dialect)
			assert.Equal(t, "ok", turn.Response.Message.Text())
		})
	}
}

// TestRefusalAcrossDialects has a chat upstream refuse and checks each
// caller's SDK sees a refusal in its own shape.
func TestRefusalAcrossDialects(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	})
	f := dialectFixture(t, dialects.NameChat, up.URL+"/v1", nil)

	ac := f.anthropic(f.slot.Secret)
	msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("bad"))}})
	require.NoError(t, err)
	assert.Equal(t, anthropic.StopReasonRefusal, msg.StopReason)
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "I can't help with that.", msg.Content[0].Text)

	r, err := f.client(f.slot.Secret).Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("bad")}})
	require.NoError(t, err)
	require.Len(t, r.Output, 1)
	content := r.Output[0].AsMessage().Content
	require.Len(t, content, 1)
	assert.Equal(t, "refusal", content[0].Type)
	assert.Equal(t, "I can't help with that.", content[0].Refusal)

	for _, turn := range f.turns(t, 2) {
		assert.Equal(t, "I can't help with that.", turn.Response.Message.Refusal)
	}
}

// TestUpstreamErrorMidStream: an upstream stream that breaks off, or that
// reports an error event, reaches the caller's SDK as a well-formed error
// and lands in the trace.
func TestUpstreamErrorMidStream(t *testing.T) {
	tests := []struct {
		name    string
		events  []string
		cut     bool
		failure trace.UpstreamFailure
	}{
		{"connection dropped", []string{
			`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		}, true, trace.UpstreamConnection},
		{"error event", []string{
			`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		}, false, trace.UpstreamErrorEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, e := range tt.events {
					var typ struct{ Type string }
					_ = json.Unmarshal([]byte(e), &typ)
					_, _ = io.WriteString(w, "event: "+typ.Type+"\ndata: "+e+"\n\n")
					w.(http.Flusher).Flush()
				}
				if tt.cut {
					_, _ = io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_de")
					w.(http.Flusher).Flush()
					conn, _, err := http.NewResponseController(w).Hijack()
					require.NoError(t, err)
					_ = conn.Close()
				}
			})
			f := dialectFixture(t, dialects.NameAnthropic, up.URL+"/v1", nil)
			ac := f.anthropic(f.slot.Secret)
			s := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
				Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			for s.Next() {
			}
			require.Error(t, s.Err(), "the caller's SDK sees an error, not a silent end")
			turn := f.turn(t)
			assert.NotEmpty(t, turn.Error)
			assert.True(t, turn.Streamed)
			assert.Equal(t, tt.failure, turn.UpstreamFailure, "the provider's failure, not the agent's")
		})
	}
}

// TestUpstreamErrorTranslated: an upstream error on the translate arm comes
// back with its status in the caller's error shape.
func TestUpstreamErrorTranslated(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusBadRequest, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`)
	})
	f := dialectFixture(t, dialects.NameChat, up.URL+"/v1", nil)
	ac := f.anthropic(f.slot.Secret)
	_, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	assert.Contains(t, apiErr.RawJSON(), "maximum context length")
	assert.Contains(t, apiErr.RawJSON(), `"type":"invalid_request_error"`)
	turn := f.turn(t)
	assert.Equal(t, http.StatusBadRequest, turn.Status)
	assert.Contains(t, turn.Error, "context_length_exceeded")
}

// TestAnthropicAuxRoutes covers count_tokens on both arms, the models list
// in Anthropic's shape, and a bad key in Anthropic's error shape.
func TestAnthropicAuxRoutes(t *testing.T) {
	url := mockUpstream(t)
	params := anthropic.MessageCountTokensParams{
		Model:    "m",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("Be brief.")},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 2 + 2?"))},
	}
	for _, up := range []string{dialects.NameAnthropic, dialects.NameChat} {
		t.Run(up, func(t *testing.T) {
			f := dialectFixture(t, up, url, nil)
			c := f.anthropic(f.slot.Secret)
			n, err := c.Messages.CountTokens(context.Background(), params)
			require.NoError(t, err)
			assert.Equal(t, int64(6), n.InputTokens, "ceil(23 chars / 4)")

			page, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
			require.NoError(t, err)
			require.Len(t, page.Data, 1)
			assert.Equal(t, runModel, page.Data[0].ID)

			bad := f.anthropic("wrong")
			_, err = bad.Messages.CountTokens(context.Background(), params)
			var apiErr *anthropic.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
			assert.Contains(t, apiErr.RawJSON(), `"authentication_error"`)
			turns, _ := f.slot.Turns()
			assert.Empty(t, turns, "count_tokens is not a model turn")
		})
	}
}

// TestGarbageGetsNativeError: an unparsable body gets a 400 in the route's
// own error shape, and never reaches the upstream.
func TestGarbageGetsNativeError(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("garbage reached the upstream: %s", r.URL.Path)
	})
	for _, updialect := range []string{dialects.NameChat, dialects.NameAnthropic} {
		f := dialectFixture(t, updialect, up.URL+"/v1", nil)
		for _, tt := range []struct {
			path      string
			anthropic bool
			wrongType string
		}{
			{"/v1/chat/completions", false, `{"messages":7}`}, {"/v1/responses", false, `{"input":{"x":1}}`},
			{"/v1/messages", true, `{"messages":7}`}, {"/v1/messages/count_tokens", true, `{"system":true}`},
		} {
			for _, body := range []string{"{not json", tt.wrongType, "", "[]"} {
				resp, got := f.post(t, tt.path, body, tt.anthropic)
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %q", tt.path, body)
				var shape struct {
					Type  string `json:"type"`
					Error struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				require.NoError(t, json.Unmarshal([]byte(got), &shape), got)
				assert.NotEmpty(t, shape.Error.Message, got)
				assert.Equal(t, tt.anthropic, shape.Type == "error", "%s: %s", tt.path, got)
			}
		}
	}
}

// postTranslated posts body at path (in the caller's dialect: Anthropic's
// when anthropic) through a fixture in front of an upstream of dialect
// upstreamDialect, which answers "ok" in it. It returns the fixture and the
// request the upstream got, decoded.
func postTranslated(t *testing.T, upstreamDialect, path, body string, anthropic bool) (fixture, map[string]any) {
	t.Helper()
	var seen map[string]any
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, json.NewDecoder(r.Body).Decode(&seen))
		d, _ := dialects.ByName(upstreamDialect)
		out, _ := d.EncodeResponse(dialects.Response{Model: "m", Message: dialects.Message{Role: "assistant",
			Content: []dialects.Part{{Type: dialects.PartText, Text: "ok"}}}})
		writeJSON(w, http.StatusOK, string(out))
	})
	f := dialectFixture(t, upstreamDialect, up.URL+"/v1", nil)
	resp, respBody := f.post(t, path, body, anthropic)
	require.Equal(t, http.StatusOK, resp.StatusCode, respBody)
	return f, seen
}
