package dialects_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	require.NoError(t, err)
	return b
}

// sseData splits an event stream into its events' data.
func sseData(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	var cur []byte
	has := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if has {
				out = append(out, cur)
			}
			cur, has = nil, false
		case strings.HasPrefix(line, "data:"):
			if has {
				cur = append(cur, '\n')
			}
			cur = append(cur, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			has = true
		}
	}
	require.NoError(t, sc.Err())
	if has {
		out = append(out, cur)
	}
	return out
}

// summary writes a conversation as one line per message, for comparisons
// across dialects that shape messages differently.
func summary(msgs []dialects.Message) []string {
	var out []string
	for _, m := range msgs {
		s := m.Role + "|" + m.Text()
		for _, p := range m.Content {
			if p.Type == dialects.PartImage {
				s += "|img:" + p.ImageURL
			}
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if args == "" {
				args = "{}"
			}
			var v any
			if json.Unmarshal([]byte(args), &v) == nil {
				b, _ := json.Marshal(v)
				args = string(b)
			}
			s += fmt.Sprintf("|call:%s:%s:%s", tc.ID, tc.Name, args)
		}
		if m.ToolCallID != "" {
			s += "|result:" + m.ToolCallID
		}
		out = append(out, s)
	}
	return out
}

// sdkRequest decodes a request body into the official SDK's params type.
func sdkRequest(d dialects.Dialect, body []byte) error {
	switch d.Name() {
	case dialects.NameChat:
		var p openai.ChatCompletionNewParams
		return json.Unmarshal(body, &p)
	case dialects.NameResponses:
		var p responses.ResponseNewParams
		return json.Unmarshal(body, &p)
	}
	var p anthropic.MessageNewParams
	return json.Unmarshal(body, &p)
}

func TestGoldenRequests(t *testing.T) {
	tests := []struct {
		dialect dialects.Dialect
		want    []string
	}{
		{dialects.Chat, []string{
			"system|You are terse.",
			"user|What is in this image, and what is 2+3?|img:data:image/png;base64,iVBORw0KGgo=",
			`assistant||call:call_a:add:{"a":2,"b":3}|call:call_b:describe:{}`,
			"tool|5|result:call_a",
			"tool|a red square|result:call_b",
			"system|Answer in one line.",
		}},
		{dialects.Anthropic, []string{
			"system|You are Claude Code.Be careful with files.",
			"user|Look at this and add 2+3.|img:data:image/png;base64,iVBORw0KGgo=",
			`assistant|Let me check.|call:toolu_01:add:{"a":2,"b":3}|call:toolu_02:describe:{}`,
			"tool|5|result:toolu_01",
			"tool|a red square|result:toolu_02",
			"user|Thanks, continue.",
		}},
		{dialects.Responses, []string{
			"system|You are Codex.",
			"developer|Sandbox: workspace-write.",
			"user|Look at this and add 2+3.|img:data:image/png;base64,iVBORw0KGgo=",
			`assistant||call:call_a:add:{"a":2,"b":3}|call:call_b:describe:{}`,
			"tool|5|result:call_a",
			"tool|a red square|result:call_b",
			"user|",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dialect.Name(), func(t *testing.T) {
			body := golden(t, tt.dialect.Name()+"_request.json")
			require.NoError(t, sdkRequest(tt.dialect, body), "the capture is a valid SDK request")
			req, err := tt.dialect.ParseRequest(body)
			require.NoError(t, err)
			assert.Equal(t, tt.want, summary(req.Messages), "ParseRequest(%s)", tt.dialect.Name())
			require.Len(t, req.Tools, 2)
			assert.Equal(t, "add", req.Tools[0].Name)
			assert.JSONEq(t, `{"type":"object","properties":{}}`, string(req.Tools[1].Parameters))
			require.NotNil(t, req.Reasoning)

			// Same dialect and across: the typed request survives encoding.
			for _, to := range dialects.All {
				out, err := to.EncodeRequest(req)
				if tt.dialect == dialects.Chat && to == dialects.Anthropic {
					// Its low effort's least thinking budget, 1024 tokens,
					// does not fit under its cap of 512: refused, and sent
					// with a cap that has room.
					var fe *dialects.FieldError
					require.ErrorAs(t, err, &fe)
					assert.Equal(t, "reasoning_effort", fe.Field)
					roomy := req
					roomy.Sampling.MaxTokens = new(int)
					*roomy.Sampling.MaxTokens = 2048
					out, err = to.EncodeRequest(roomy)
				}
				require.NoError(t, err)
				require.NoError(t, sdkRequest(to, out), "%s → %s: %s", tt.dialect.Name(), to.Name(), out)
				back, err := to.ParseRequest(out)
				require.NoError(t, err)
				want := tt.want
				if to == dialects.Anthropic {
					want = hoistSystem(tt.want)
					want = slices.DeleteFunc(slices.Clone(want), func(l string) bool { return l == "user|" })
				}
				got := summary(back.Messages)
				if to == dialects.Anthropic && tt.dialect != dialects.Anthropic {
					assert.Equal(t, joinSystem(want), got, "%s → anthropic", tt.dialect.Name())
				} else if tt.dialect == dialects.Anthropic && to == dialects.Responses {
					assert.Equal(t, want, got)
				} else {
					assert.Equal(t, want, got, "%s → %s", tt.dialect.Name(), to.Name())
				}
				require.Len(t, back.Tools, 2)
				assert.Equal(t, req.Sampling.MaxTokens != nil || to == dialects.Anthropic, back.Sampling.MaxTokens != nil)
			}
		})
	}
}

// hoistSystem moves system and developer lines first, as the Anthropic
// encoder does (Anthropic has no system turn mid-conversation).
func hoistSystem(lines []string) []string {
	var sys, rest []string
	for _, l := range lines {
		if strings.HasPrefix(l, "system|") || strings.HasPrefix(l, "developer|") {
			sys = append(sys, l)
		} else {
			rest = append(rest, l)
		}
	}
	return append(sys, rest...)
}

// joinSystem merges leading system lines into one, as Anthropic's single
// system field reads back.
func joinSystem(lines []string) []string {
	text := ""
	i := 0
	for ; i < len(lines); i++ {
		role, rest, _ := strings.Cut(lines[i], "|")
		if role != "system" && role != "developer" {
			break
		}
		text += rest
	}
	if i == 0 {
		return lines
	}
	return append([]string{"system|" + text}, lines[i:]...)
}

// sdkResponse decodes a response body into the official SDK's type and
// returns its tool-call names and text.
func sdkResponse(t *testing.T, d dialects.Dialect, body []byte) (calls []string, text string) {
	t.Helper()
	switch d.Name() {
	case dialects.NameChat:
		var r openai.ChatCompletion
		require.NoError(t, json.Unmarshal(body, &r))
		require.Len(t, r.Choices, 1)
		for _, tc := range r.Choices[0].Message.ToolCalls {
			calls = append(calls, tc.Function.Name)
		}
		return calls, r.Choices[0].Message.Content
	case dialects.NameResponses:
		var r responses.Response
		require.NoError(t, json.Unmarshal(body, &r))
		for _, it := range r.Output {
			if it.Type == "function_call" {
				calls = append(calls, it.Name)
			}
		}
		return calls, r.OutputText()
	}
	var r anthropic.Message
	require.NoError(t, json.Unmarshal(body, &r))
	for _, b := range r.Content {
		switch b.Type {
		case "tool_use":
			calls = append(calls, b.Name)
		case "text":
			text += b.Text
		}
	}
	return calls, text
}

func TestGoldenResponses(t *testing.T) {
	tests := []struct {
		dialect dialects.Dialect
		want    dialects.Response
	}{
		{dialects.Chat, dialects.Response{
			ID: "chatcmpl-Bx1", Model: "gpt-4.1-2025-04-14", FinishReason: dialects.FinishToolCalls,
			Message: dialects.Message{Role: dialects.RoleAssistant, Reasoning: "Need both tools.", ToolCalls: []dialects.ToolCall{
				{ID: "call_1", Name: "add", Arguments: `{"a":2,"b":3}`}, {ID: "call_2", Name: "describe", Arguments: `{}`}}},
			Usage: dialects.Usage{InputTokens: 120, OutputTokens: 40, ReasoningTokens: 12, CacheReadTokens: 64},
		}},
		{dialects.Anthropic, dialects.Response{
			ID: "msg_01XFD", Model: "claude-sonnet-4-5-20250929", FinishReason: dialects.FinishToolCalls,
			Message: dialects.Message{Role: dialects.RoleAssistant, Reasoning: "Both tools are needed.",
				Thinking: []dialects.Thinking{{Text: "Both tools are needed.", Signature: "ErUBCkYIAxgCIkB-sig2"}},
				Content:  []dialects.Part{{Type: dialects.PartText, Text: "Checking."}},
				ToolCalls: []dialects.ToolCall{
					{ID: "toolu_03", Name: "add", Arguments: `{"a":2,"b":3}`}, {ID: "toolu_04", Name: "describe", Arguments: `{}`}}},
			Usage: dialects.Usage{InputTokens: 170, OutputTokens: 60, CacheReadTokens: 100, CacheWriteTokens: 20},
		}},
		{dialects.Responses, dialects.Response{
			ID: "resp_01", Model: "gpt-5-codex", FinishReason: dialects.FinishToolCalls,
			Message: dialects.Message{Role: dialects.RoleAssistant, Reasoning: "Need both tools.",
				Thinking: []dialects.Thinking{{Text: "Need both tools.", ID: "rs_02", Encrypted: "gAAAAB-enc2"}},
				Content:  []dialects.Part{{Type: dialects.PartText, Text: "Checking."}},
				ToolCalls: []dialects.ToolCall{
					{ID: "call_c", Name: "add", Arguments: `{"a":2,"b":3}`}, {ID: "call_d", Name: "describe", Arguments: `{}`}}},
			Usage: dialects.Usage{InputTokens: 170, OutputTokens: 60, ReasoningTokens: 20, CacheReadTokens: 100},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dialect.Name(), func(t *testing.T) {
			body := golden(t, tt.dialect.Name()+"_response.json")
			sdkResponse(t, tt.dialect, body)
			got, err := tt.dialect.ParseResponse(body)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "ParseResponse(%s)", tt.dialect.Name())

			stream := tt.dialect.NewStream()
			for _, data := range sseData(t, golden(t, tt.dialect.Name()+"_stream.sse")) {
				require.NoError(t, stream.Add(data))
			}
			assert.True(t, stream.Done())
			assert.Equal(t, compactArgs(tt.want), compactArgs(stream.Response()), "the stream capture assembles into the same response")

			// Serialized for a caller of each dialect, JSON and SSE, it reads
			// back the same, and the SDK decodes it.
			for _, to := range dialects.All {
				out, err := to.EncodeResponse(got)
				require.NoError(t, err)
				calls, text := sdkResponse(t, to, out)
				assert.Equal(t, []string{"add", "describe"}, calls, "%s → %s", tt.dialect.Name(), to.Name())
				assert.Equal(t, got.Message.Text(), text)
				back, err := to.ParseResponse(out)
				require.NoError(t, err)
				assert.Equal(t, summary([]dialects.Message{got.Message}), summary([]dialects.Message{back.Message}))
				assert.Equal(t, got.FinishReason, back.FinishReason)
				assert.Equal(t, got.Message.Reasoning, back.Message.Reasoning, "reasoning crosses %s → %s", tt.dialect.Name(), to.Name())
				assert.Equal(t, got.Usage.InputTokens, back.Usage.InputTokens)
				assert.Equal(t, got.Usage.OutputTokens, back.Usage.OutputTokens)

				var sse bytes.Buffer
				require.NoError(t, to.WriteStream(&sse, got))
				assembled := to.NewStream()
				events := sseData(t, sse.Bytes())
				for _, data := range events {
					require.NoError(t, assembled.Add(data))
				}
				assert.True(t, assembled.Done())
				assert.Equal(t, summary([]dialects.Message{got.Message}), summary([]dialects.Message{assembled.Response().Message}))
				assert.Equal(t, got.Message.Reasoning, assembled.Response().Message.Reasoning)
				sdkStream(t, to, events, got)
			}
		})
	}
}

// sdkStream feeds events through the official SDK's stream types and
// accumulators.
func sdkStream(t *testing.T, d dialects.Dialect, events [][]byte, want dialects.Response) {
	t.Helper()
	switch d.Name() {
	case dialects.NameChat:
		var acc openai.ChatCompletionAccumulator
		for _, data := range events {
			if string(data) == "[DONE]" {
				continue
			}
			var c openai.ChatCompletionChunk
			require.NoError(t, json.Unmarshal(data, &c))
			require.True(t, acc.AddChunk(c), "chunk rejected: %s", data)
		}
		require.Len(t, acc.Choices, 1)
		require.Len(t, acc.Choices[0].Message.ToolCalls, len(want.Message.ToolCalls))
		for i, tc := range want.Message.ToolCalls {
			assert.Equal(t, tc.Name, acc.Choices[0].Message.ToolCalls[i].Function.Name)
			assert.JSONEq(t, tc.Arguments, acc.Choices[0].Message.ToolCalls[i].Function.Arguments)
		}
		assert.Equal(t, int64(want.Usage.OutputTokens), acc.Usage.CompletionTokens)
	case dialects.NameResponses:
		var last responses.ResponseStreamEventUnion
		for _, data := range events {
			require.NoError(t, json.Unmarshal(data, &last))
		}
		assert.Equal(t, "response.completed", last.Type)
		assert.Equal(t, want.Message.Text(), last.Response.OutputText())
	case dialects.NameAnthropic:
		var acc anthropic.Message
		for _, data := range events {
			var ev anthropic.MessageStreamEventUnion
			require.NoError(t, json.Unmarshal(data, &ev))
			require.NoError(t, acc.Accumulate(ev))
		}
		var calls []string
		for _, b := range acc.Content {
			if b.Type == "tool_use" {
				calls = append(calls, b.Name)
				assert.True(t, json.Valid(b.Input), "tool input %s", b.Input)
			}
		}
		assert.Len(t, calls, len(want.Message.ToolCalls))
		assert.Equal(t, int64(want.Usage.OutputTokens), acc.Usage.OutputTokens)
	}
}

// compactArgs rewrites tool-call arguments without insignificant spaces.
func compactArgs(r dialects.Response) dialects.Response {
	calls := slices.Clone(r.Message.ToolCalls)
	for i, tc := range calls {
		var b bytes.Buffer
		if json.Compact(&b, []byte(tc.Arguments)) == nil {
			calls[i].Arguments = b.String()
		}
	}
	r.Message.ToolCalls = calls
	return r
}
