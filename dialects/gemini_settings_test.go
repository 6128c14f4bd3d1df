package dialects_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// TestGeminiRefusals: a Gemini setting another dialect has no field for
// is refused naming it, and a setting Gemini has none for likewise.
func TestGeminiRefusals(t *testing.T) {
	tests := []struct {
		from  dialects.Dialect
		body  string
		to    dialects.Dialect
		field string
	}{
		{dialects.Gemini, `{"contents":[],"generationConfig":{"topK":40}}`, dialects.Chat, "generationConfig.topK"},
		{dialects.Gemini, `{"contents":[],"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}]}`, dialects.Anthropic, "safetySettings"},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"}}}`, dialects.Responses, "generationConfig.responseSchema"},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"responseMimeType":"text/x.enum"}}`, dialects.Chat, "generationConfig.responseMimeType"},
		{dialects.Gemini, `{"contents":[],"tools":[{"googleSearch":{}}]}`, dialects.Anthropic, "tools"},
		{dialects.Gemini, `{"contents":[],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["a","b"]}}}`, dialects.Chat, "toolConfig.functionCallingConfig"},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"stopSequences":["x"]}}`, dialects.Responses, "generationConfig.stopSequences"},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"candidateCount":2}}`, dialects.Anthropic, "generationConfig.candidateCount"},
		{dialects.Chat, `{"messages":[],"logprobs":true}`, dialects.Gemini, "logprobs"},
		{dialects.Chat, `{"messages":[],"metadata":{"a":"b"}}`, dialects.Gemini, "metadata"},
		{dialects.Chat, `{"messages":[],"service_tier":"flex"}`, dialects.Gemini, "service_tier"},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"xhigh"}`, dialects.Gemini, "reasoning_effort"},
		{dialects.Anthropic, `{"messages":[],"output_config":{"effort":"max"}}`, dialects.Gemini, "output_config.effort"},
		{dialects.Responses, `{"input":[],"previous_response_id":"resp_1"}`, dialects.Gemini, "previous_response_id"},
	}
	for _, tt := range tests {
		req, err := tt.from.ParseRequest([]byte(tt.body))
		require.NoError(t, err, "ParseRequest(%s)", tt.body)
		_, err = tt.to.EncodeRequest(req)
		var fe *dialects.FieldError
		require.ErrorAs(t, err, &fe, "%s(%s) → %s", tt.from.Name(), tt.body, tt.to.Name())
		assert.Equal(t, tt.field, fe.Field, "%s(%s) → %s", tt.from.Name(), tt.body, tt.to.Name())
	}
}

// TestGeminiSettingsMapping: the settings of the translation table, to
// and from Gemini's generationConfig and toolConfig.
func TestGeminiSettingsMapping(t *testing.T) {
	tests := []wireCase{
		{dialects.Chat, `{"messages":[],"reasoning_effort":"high","max_completion_tokens":100,"seed":7,"stop":["x"],"n":2}`, dialects.Gemini, "generationConfig",
			`{"thinkingConfig":{"thinkingLevel":"high"},"maxOutputTokens":100,"seed":7,"stopSequences":["x"],"candidateCount":2}`},
		{dialects.Chat, `{"messages":[],"reasoning_effort":"none"}`, dialects.Gemini, "generationConfig", `{"thinkingConfig":{"thinkingBudget":0}}`},
		{dialects.Anthropic, `{"messages":[],"max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":2048}}`, dialects.Gemini, "generationConfig",
			`{"maxOutputTokens":9000,"thinkingConfig":{"thinkingBudget":2048}}`},
		{dialects.Anthropic, `{"messages":[],"max_tokens":10,"thinking":{"type":"adaptive"}}`, dialects.Gemini, "generationConfig",
			`{"maxOutputTokens":10,"thinkingConfig":{"thinkingBudget":-1}}`},
		{dialects.Chat, `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"}}}}`, dialects.Gemini, "generationConfig",
			`{"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}}`},
		{dialects.Chat, `{"messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, dialects.Gemini, "toolConfig",
			`{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingLevel":"low"}}}`, dialects.Chat, "reasoning_effort", `"low"`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingBudget":20000}}}`, dialects.Chat, "reasoning_effort", `"high"`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`, dialects.Responses, "reasoning", `{"effort":"none","summary":"auto"}`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"maxOutputTokens":3000,"thinkingConfig":{"thinkingBudget":2048}}}`, dialects.Anthropic, "thinking",
			`{"type":"enabled","budget_tokens":2048}`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}}}`, dialects.Chat, "response_format",
			`{"type":"json_schema","json_schema":{"name":"response","schema":{"type":"object"}}}`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"responseMimeType":"application/json"}}`, dialects.Responses, "text", `{"format":{"type":"json_object"}}`},
		{dialects.Gemini, `{"contents":[],"generationConfig":{"seed":5,"candidateCount":3}}`, dialects.Chat, "n", `3`},
		{dialects.Gemini, `{"contents":[],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, dialects.Anthropic, "tool_choice", `{"type":"any"}`},
		{dialects.Gemini, `{"contents":[],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`, dialects.Chat, "tool_choice", `"none"`},
	}
	checkWireFields(t, tests)
}

// TestGeminiOverlay: sampling is set inside generationConfig, every other
// byte kept; without generationConfig one is added.
func TestGeminiOverlay(t *testing.T) {
	temp, maxTokens, seed := 0.2, 64, int64(9)
	s := dialects.Sampling{Temperature: &temp, MaxTokens: &maxTokens, Seed: &seed}
	tests := []struct{ body, want string }{
		{`{"contents": [], "generationConfig": {"temperature": 1, "topK": 3}, "x": 1}`,
			`{"contents": [], "generationConfig": {"temperature": 0.2, "topK": 3,"maxOutputTokens":64,"seed":9}, "x": 1}`},
		{`{"contents":[],"generationConfig":{}}`, `{"contents":[],"generationConfig":{"temperature":0.2,"maxOutputTokens":64,"seed":9}}`},
		{`{"contents":[],"generationConfig":null}`, `{"contents":[],"generationConfig":{"temperature":0.2,"maxOutputTokens":64,"seed":9}}`},
		{`{"contents":[]}`, `{"contents":[],"generationConfig":{"temperature":0.2,"maxOutputTokens":64,"seed":9}}`},
	}
	for _, tt := range tests {
		out, err := dialects.Gemini.Overlay([]byte(tt.body), "ignored", s)
		require.NoError(t, err, "Overlay(%s)", tt.body)
		assert.Equal(t, tt.want, string(out.Bytes()), "Overlay(%s)", tt.body)
	}
	_, err := dialects.Gemini.Overlay([]byte(`{"contents":{}}`), "", s)
	assert.Error(t, err, "what ParseRequest refuses, Overlay refuses")
	_, err = dialects.Gemini.ParseRequest([]byte(`{"contents":{}}`))
	assert.Error(t, err)
}
