package dialects_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// wireCase is a request in one dialect and the field it must carry, or
// leave out, encoded for another.
type wireCase struct {
	from  dialects.Dialect
	body  string
	to    dialects.Dialect
	field string
	want  string // JSON; "" for absent
}

// checkWireFields parses each case's body in its dialect, encodes it for
// the other and checks the field.
func checkWireFields(t *testing.T, tests []wireCase) {
	t.Helper()
	for _, tt := range tests {
		req, err := tt.from.ParseRequest([]byte(tt.body))
		require.NoError(t, err, "ParseRequest(%s)", tt.body)
		got := wireField(t, tt.to, req, tt.field)
		if tt.want == "" {
			assert.Empty(t, got, "%s(%s) → %s %s", tt.from.Name(), tt.body, tt.to.Name(), tt.field)
			continue
		}
		assert.JSONEq(t, tt.want, got, "%s(%s) → %s %s", tt.from.Name(), tt.body, tt.to.Name(), tt.field)
	}
}

// wireField encodes req for to and returns the JSON of the named field
// ("" when absent).
func wireField(t *testing.T, to dialects.Dialect, req dialects.Request, field string) string {
	t.Helper()
	out, err := to.EncodeRequest(req)
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out, &got))
	return string(got[field])
}

// TestReasoningMapping is the table of reasoning settings across dialects,
// both ways: OpenAI efforts to Anthropic budgets, Anthropic budgets and
// adaptive thinking to efforts.
func TestReasoningMapping(t *testing.T) {
	tests := []wireCase{
		{dialects.Chat, `{"messages":[],"reasoning_effort":"minimal"}`, dialects.Anthropic, "thinking", `{"type":"enabled","budget_tokens":1024}`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"low"}`, dialects.Anthropic, "thinking", `{"type":"enabled","budget_tokens":1024}`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"medium"}`, dialects.Anthropic, "thinking", `{"type":"enabled","budget_tokens":4096}`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"high"}`, dialects.Anthropic, "thinking", `{"type":"enabled","budget_tokens":16384}`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"xhigh"}`, dialects.Anthropic, "thinking", `{"type":"enabled","budget_tokens":32768}`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"none"}`, dialects.Anthropic, "thinking", ``},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"none"}`, dialects.Responses, "reasoning", `{"effort":"none","summary":"auto"}`},
		{dialects.Responses, `{"input":[],"reasoning":{"effort":"high","summary":"detailed"}}`, dialects.Anthropic, "thinking", `{"type":"enabled","budget_tokens":16384}`},
		{dialects.Responses, `{"input":[],"reasoning":{"effort":"high","summary":"detailed"}}`, dialects.Chat, "reasoning_effort", `"high"`},
		{dialects.Responses, `{"input":[],"reasoning":{"effort":"low","summary":"detailed"}}`, dialects.Responses, "reasoning", `{"effort":"low","summary":"detailed"}`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":1024}}`, dialects.Chat, "reasoning_effort", `"low"`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":4095}}`, dialects.Chat, "reasoning_effort", `"low"`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":4096}}`, dialects.Chat, "reasoning_effort", `"medium"`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":16383}}`, dialects.Responses, "reasoning", `{"effort":"medium","summary":"auto"}`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":16384}}`, dialects.Responses, "reasoning", `{"effort":"high","summary":"auto"}`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":60000}}`, dialects.Chat, "reasoning_effort", `"high"`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"adaptive"}}`, dialects.Chat, "reasoning_effort", `"medium"`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}}`, dialects.Responses, "reasoning", `{"effort":"low","summary":"auto"}`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"adaptive"},"output_config":{"effort":"xhigh"}}`, dialects.Chat, "reasoning_effort", `"xhigh"`},
		{dialects.Anthropic, `{"model":"claude-opus-4-6","messages":[],"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}}`, dialects.Anthropic, "output_config", `{"effort":"max"}`},
		{dialects.Anthropic, `{"model":"claude-opus-4-6","messages":[],"thinking":{"type":"adaptive"}}`, dialects.Anthropic, "thinking", `{"type":"adaptive"}`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"disabled"}}`, dialects.Chat, "reasoning_effort", ``},
		// An effort without thinking is the effort.
		{dialects.Anthropic, `{"messages":[],"output_config":{"effort":"high"}}`, dialects.Chat, "reasoning_effort", `"high"`},
		{dialects.Anthropic, `{"messages":[],"output_config":{"effort":"low"}}`, dialects.Responses, "reasoning", `{"effort":"low","summary":"auto"}`},
		// A Responses caller naming no effort asks for none.
		{dialects.Responses, `{"input":[],"reasoning":{"summary":"auto"}}`, dialects.Chat, "reasoning_effort", ``},
		// Claude 4.6 and later think adaptively, at the caller's effort.
		{dialects.Chat, `{"model":"claude-opus-4-6","messages":[],"reasoning_effort":"high"}`, dialects.Anthropic, "thinking", `{"type":"adaptive"}`},
		{dialects.Chat, `{"model":"claude-sonnet-4-6","messages":[],"reasoning_effort":"xhigh"}`, dialects.Anthropic, "output_config", `{"effort":"xhigh"}`},
		{dialects.Chat, `{"model":"claude-opus-4-7","messages":[],"reasoning_effort":"minimal"}`, dialects.Anthropic, "output_config", `{"effort":"low"}`},
		{dialects.Chat, `{"model":"claude-opus-4-6","messages":[],"reasoning_effort":"max"}`, dialects.Anthropic, "output_config", `{"effort":"max"}`},
		{dialects.Chat, `{"model":"claude-sonnet-4-5","messages":[],"reasoning_effort":"high"}`, dialects.Anthropic, "output_config", ``},
	}
	checkWireFields(t, tests)
}

// TestThinkingKeepsTheCallersCap: an effort becomes a thinking budget that
// fits under the caller's max tokens, or is refused naming both fields; a
// model that thinks adaptively keeps the cap as it is; without a cap there
// is room for the budget.
func TestThinkingKeepsTheCallersCap(t *testing.T) {
	tests := []struct {
		body                    string
		thinking, maxTokens, oc string // JSON of the fields sent; "" absent
		refused                 string // what the refusal says, instead
	}{
		{body: `{"model":"claude-sonnet-4-5","messages":[],"reasoning_effort":"high","max_completion_tokens":2000}`,
			thinking: `{"type":"enabled","budget_tokens":1999}`, maxTokens: `2000`},
		{body: `{"model":"claude-sonnet-4-5","messages":[],"reasoning_effort":"medium","max_completion_tokens":64000}`,
			thinking: `{"type":"enabled","budget_tokens":4096}`, maxTokens: `64000`},
		{body: `{"model":"claude-sonnet-4-5","messages":[],"reasoning_effort":"high"}`,
			thinking: `{"type":"enabled","budget_tokens":16384}`, maxTokens: `20480`},
		{body: `{"model":"claude-opus-4-6","messages":[],"reasoning_effort":"high","max_completion_tokens":2000}`,
			thinking: `{"type":"adaptive"}`, maxTokens: `2000`, oc: `{"effort":"high"}`},
		{body: `{"model":"claude-opus-4-6","messages":[],"reasoning_effort":"low","max_completion_tokens":500}`,
			thinking: `{"type":"adaptive"}`, maxTokens: `500`, oc: `{"effort":"low"}`},
		{body: `{"model":"claude-sonnet-4-5","messages":[],"reasoning_effort":"low","max_completion_tokens":1024}`,
			refused: `reasoning_effort cannot be sent: with max_completion_tokens 1024 there is no room for Anthropic's least thinking budget`},
		{body: `{"model":"claude-sonnet-4-5","messages":[],"reasoning_effort":"max"}`,
			refused: `reasoning_effort cannot be sent: "max" needs adaptive thinking, which claude-sonnet-4-5 does not take`},
	}
	for _, tt := range tests {
		req, err := dialects.Chat.ParseRequest([]byte(tt.body))
		require.NoError(t, err)
		out, err := dialects.Anthropic.EncodeRequest(req)
		if tt.refused != "" {
			var fe *dialects.FieldError
			require.ErrorAs(t, err, &fe, "EncodeRequest(%s)", tt.body)
			assert.Equal(t, "reasoning_effort", fe.Field)
			assert.ErrorContains(t, err, tt.refused)
			continue
		}
		require.NoError(t, err, "EncodeRequest(%s)", tt.body)
		var got map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(out, &got))
		assert.JSONEq(t, tt.thinking, string(got["thinking"]), "thinking of %s", tt.body)
		assert.JSONEq(t, tt.maxTokens, string(got["max_tokens"]), "max_tokens of %s", tt.body)
		if tt.oc == "" {
			assert.Empty(t, got["output_config"], "output_config of %s", tt.body)
		} else {
			assert.JSONEq(t, tt.oc, string(got["output_config"]), "output_config of %s", tt.body)
		}
	}
}

// TestEffortsRefusedByName: an effort the upstream has no word for is
// refused in the caller's words, toward every upstream.
func TestEffortsRefusedByName(t *testing.T) {
	tests := []struct {
		from    dialects.Dialect
		body    string
		to      dialects.Dialect
		field   string
		refused string
	}{
		{dialects.Chat, `{"messages":[],"reasoning_effort":"ultra"}`, dialects.Anthropic, "reasoning_effort", `"ultra" is no effort Anthropic takes`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"max"}`, dialects.Responses, "reasoning_effort", `"max" is no OpenAI reasoning effort`},
		{dialects.Responses, `{"input":[],"reasoning":{"effort":"max"}}`, dialects.Chat, "reasoning.effort", `"max" is no OpenAI reasoning effort`},
		{dialects.Responses, `{"input":[],"reasoning":{"effort":"ultra"}}`, dialects.Anthropic, "reasoning.effort", `"ultra" is no effort Anthropic takes`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"adaptive"},"output_config":{"effort":"max"}}`, dialects.Chat, "output_config.effort", `"max" is no OpenAI reasoning effort`},
		{dialects.Anthropic, `{"messages":[],"output_config":{"effort":"max"}}`, dialects.Responses, "output_config.effort", `"max" is no OpenAI reasoning effort`},
	}
	for _, tt := range tests {
		req, err := tt.from.ParseRequest([]byte(tt.body))
		require.NoError(t, err)
		_, err = tt.to.EncodeRequest(req)
		var fe *dialects.FieldError
		require.ErrorAs(t, err, &fe, "%s(%s) → %s", tt.from.Name(), tt.body, tt.to.Name())
		assert.Equal(t, tt.field, fe.Field)
		assert.ErrorContains(t, err, tt.refused)
	}
}

func TestParallelToolCallsMapping(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"a"}}]`
	tests := []wireCase{
		{dialects.Chat, `{"messages":[],` + tools + `,"parallel_tool_calls":false}`, dialects.Anthropic, "tool_choice", `{"type":"auto","disable_parallel_tool_use":true}`},
		{dialects.Chat, `{"messages":[],` + tools + `,"parallel_tool_calls":false,"tool_choice":"required"}`, dialects.Anthropic, "tool_choice", `{"type":"any","disable_parallel_tool_use":true}`},
		{dialects.Chat, `{"messages":[],` + tools + `,"parallel_tool_calls":false,"tool_choice":"none"}`, dialects.Anthropic, "tool_choice", `{"type":"none"}`},
		{dialects.Chat, `{"messages":[],` + tools + `,"parallel_tool_calls":true}`, dialects.Anthropic, "tool_choice", ``},
		{dialects.Chat, `{"messages":[],` + tools + `,"parallel_tool_calls":false}`, dialects.Responses, "parallel_tool_calls", `false`},
		{dialects.Responses, `{"input":[],"tools":[{"type":"function","name":"a"}],"parallel_tool_calls":false}`, dialects.Chat, "parallel_tool_calls", `false`},
		{dialects.Responses, `{"input":[],"tools":[{"type":"function","name":"a"}],"parallel_tool_calls":true}`, dialects.Chat, "parallel_tool_calls", `true`},
		{dialects.Anthropic, `{"messages":[],"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`, dialects.Chat, "parallel_tool_calls", `false`},
		{dialects.Anthropic, `{"messages":[],"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`, dialects.Responses, "parallel_tool_calls", `false`},
		// OpenAI refuses parallel_tool_calls without tools.
		{dialects.Responses, `{"input":[],"parallel_tool_calls":false}`, dialects.Chat, "parallel_tool_calls", ``},
	}
	checkWireFields(t, tests)
}

func TestResponsesStoreInclude(t *testing.T) {
	tests := []struct {
		from                dialects.Dialect
		body                string
		wantStore, wantIncl string
	}{
		// Reasoning asked for: its state must come back without storage.
		{dialects.Chat, `{"messages":[],"reasoning_effort":"low"}`, `false`, `["reasoning.encrypted_content"]`},
		{dialects.Anthropic, `{"messages":[],"thinking":{"type":"enabled","budget_tokens":2000}}`, `false`, `["reasoning.encrypted_content"]`},
		// No reasoning, no state: the provider's defaults.
		{dialects.Chat, `{"messages":[]}`, ``, ``},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"none"}`, ``, ``},
	}
	for _, tt := range tests {
		req, err := tt.from.ParseRequest([]byte(tt.body))
		require.NoError(t, err)
		assert.Equal(t, tt.wantStore, wireField(t, dialects.Responses, req, "store"), "%s store", tt.body)
		assert.Equal(t, tt.wantIncl, wireField(t, dialects.Responses, req, "include"), "%s include", tt.body)
	}
	// A Responses caller's own choice is kept.
	req := dialects.Request{Reasoning: &dialects.ReasoningConfig{Effort: "low"}, Store: ptrTo(true), Include: []string{"x"}}
	assert.Equal(t, `true`, wireField(t, dialects.Responses, req, "store"))
	assert.Equal(t, `["x"]`, wireField(t, dialects.Responses, req, "include"))
}

func ptrTo[T any](v T) *T { return &v }

// TestCarriedStateMalformed: state that claims to be evalflow's but is not
// readable is refused, not dropped.
func TestCarriedStateMalformed(t *testing.T) {
	tests := []struct {
		d    dialects.Dialect
		body string
		want string
	}{
		{dialects.Anthropic, `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"evalflow.responses.v1:%%%"}]}]}`, "not base64"},
		{dialects.Anthropic, `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"evalflow.responses.v9:AAAA"}]}]}`, `unknown version "evalflow.responses.v9"`},
		{dialects.Responses, `{"input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"evalflow.anthropic.v1:bm90IGpzb24="}]}`, "evalflow.anthropic.v1: state"},
		{dialects.Responses, `{"input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"evalflow.chat.v1:e30="}]}`, "not a JSON array"},
	}
	for _, tt := range tests {
		_, err := tt.d.ParseRequest([]byte(tt.body))
		assert.ErrorContains(t, err, tt.want, "ParseRequest(%s)", tt.body)
	}
}

// TestCarriedStateCodec: each dialect's state, handed to a caller of every
// other dialect and echoed back, returns to its upstream as it was.
func TestCarriedStateCodec(t *testing.T) {
	details := json.RawMessage(`[{"type":"reasoning.encrypted","data":"x+/=","format":"unknown","index":0}]`)
	tests := []struct {
		name     string
		msg      dialects.Message
		upstream dialects.Dialect
		field    string // what the upstream must see again
	}{
		{"anthropic", dialects.Message{Role: "assistant", Reasoning: "ab", Thinking: []dialects.Thinking{
			{Text: "a", Signature: "S+/1=="}, {Redacted: "R+/=="}, {Text: "b", Signature: "S2"}}}, dialects.Anthropic, "messages"},
		{"responses", dialects.Message{Role: "assistant", Reasoning: "a", Thinking: []dialects.Thinking{
			{Text: "a", ID: "rs_1", Encrypted: "gAAA+/=="}}}, dialects.Responses, "input"},
		{"chat", dialects.Message{Role: "assistant", Reasoning: "a", ReasoningDetails: details,
			Thinking: []dialects.Thinking{{Text: "a"}}}, dialects.Chat, "messages"},
	}
	for _, tt := range tests {
		tt.msg.ToolCalls = []dialects.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}
		want := wireField(t, tt.upstream, dialects.Request{Messages: []dialects.Message{tt.msg}}, tt.field)
		for _, caller := range dialects.All {
			if caller == tt.upstream {
				continue
			}
			// The caller gets the answer and echoes its assistant turn.
			answer, err := caller.EncodeResponse(dialects.Response{Message: tt.msg, FinishReason: dialects.FinishToolCalls})
			require.NoError(t, err)
			echo := echoRequest(t, caller, answer)
			req, err := caller.ParseRequest(echo)
			require.NoError(t, err, "%s: %s", caller.Name(), echo)
			require.Len(t, req.Messages, 1)
			assert.JSONEq(t, want, wireField(t, tt.upstream, req, tt.field), "%s state through a %s caller", tt.name, caller.Name())
		}
	}
}

// echoRequest makes a request whose only message is the assistant turn of
// answer, as a caller of d echoes it.
func echoRequest(t *testing.T, d dialects.Dialect, answer []byte) []byte {
	t.Helper()
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(answer, &obj))
	var out any
	switch d.Name() {
	case dialects.NameChat:
		var choices []struct {
			Message json.RawMessage `json:"message"`
		}
		require.NoError(t, json.Unmarshal(obj["choices"], &choices))
		out = map[string]any{"messages": []json.RawMessage{choices[0].Message}}
	case dialects.NameResponses:
		out = map[string]any{"input": obj["output"]}
	case dialects.NameAnthropic:
		out = map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": obj["content"]}}}
	}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	return b
}

// TestForeignReasoningDetailsToAnthropic: a chat caller's reasoning_details
// of another provider carry no signature Anthropic would take; the
// tool-calling turn then has no thinking block, and thinking is off for
// that request rather than refused by Anthropic.
func TestForeignReasoningDetailsToAnthropic(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,` +
		`"reasoning_details":[{"type":"reasoning.text","text":"t","signature":"gemini-sig","format":"google-gemini-v1","index":0}],` +
		`"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c","content":"1"}],"reasoning_effort":"high"}`
	req, err := dialects.Chat.ParseRequest([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, "t", req.Messages[1].Reasoning)
	var msgs []struct {
		Content []map[string]any `json:"content"`
	}
	require.NoError(t, json.Unmarshal([]byte(wireField(t, dialects.Anthropic, req, "messages")), &msgs))
	require.Len(t, msgs, 3)
	assert.Equal(t, "tool_use", msgs[1].Content[0]["type"])
	assert.Empty(t, wireField(t, dialects.Anthropic, req, "thinking"))

	// With its Anthropic block back, thinking stays on.
	body = strings.Replace(body, `"signature":"gemini-sig","format":"google-gemini-v1"`, `"signature":"S","format":"anthropic-claude-v1"`, 1)
	req, err = dialects.Chat.ParseRequest([]byte(body))
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"enabled","budget_tokens":16384}`, wireField(t, dialects.Anthropic, req, "thinking"))
}

// TestStatelessReasoningItem: an item evalflow made for reasoning without
// state comes back as text only, not as a Responses item of that id.
func TestStatelessReasoningItem(t *testing.T) {
	out, err := dialects.Responses.EncodeResponse(dialects.Response{Message: dialects.Message{Role: "assistant", Reasoning: "hm",
		Content: []dialects.Part{{Type: dialects.PartText, Text: "hi"}}}})
	require.NoError(t, err)
	assert.Contains(t, string(out), `"id":"rs_evalflow_0"`)
	req, err := dialects.Responses.ParseRequest(echoRequest(t, dialects.Responses, out))
	require.NoError(t, err)
	assert.Equal(t, []dialects.Thinking{{Text: "hm"}}, req.Messages[0].Thinking)
	var msgs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(wireField(t, dialects.Chat, req, "messages")), &msgs))
	assert.Equal(t, "hm", msgs[0]["reasoning_content"])
	assert.NotContains(t, msgs[0], "reasoning_details")
}
