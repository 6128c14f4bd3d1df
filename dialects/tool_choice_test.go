package dialects_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

func TestToolChoiceAndStopCross(t *testing.T) {
	tests := []struct {
		from dialects.Dialect
		body string
		want dialects.ToolChoice
		// wire is the tool_choice each dialect is sent.
		wire map[string]string
	}{
		{dialects.Chat, `{"messages":[],"tool_choice":{"type":"function","function":{"name":"add"}},"stop":"END"}`,
			dialects.ToolChoice{Mode: "required", Name: "add"},
			map[string]string{"chat": `{"type":"function","function":{"name":"add"}}`, "responses": `{"type":"function","name":"add"}`, "anthropic": `{"type":"tool","name":"add"}`}},
		{dialects.Anthropic, `{"messages":[],"tool_choice":{"type":"any"},"stop_sequences":["END"]}`,
			dialects.ToolChoice{Mode: "required"},
			map[string]string{"chat": `"required"`, "responses": `"required"`, "anthropic": `{"type":"any"}`}},
		{dialects.Responses, `{"input":[],"tool_choice":"none"}`,
			dialects.ToolChoice{Mode: "none"},
			map[string]string{"chat": `"none"`, "responses": `"none"`, "anthropic": `{"type":"none"}`}},
	}
	for _, tt := range tests {
		req, err := tt.from.ParseRequest([]byte(tt.body))
		require.NoError(t, err)
		require.NotNil(t, req.ToolChoice, "ParseRequest(%s)", tt.body)
		assert.Equal(t, tt.want, *req.ToolChoice, "ParseRequest(%s)", tt.body)
		if tt.from != dialects.Responses {
			assert.Equal(t, []string{"END"}, req.Stop)
		}
		for _, to := range dialects.All {
			out, err := to.EncodeRequest(req)
			if to == dialects.Responses && len(req.Stop) > 0 {
				require.ErrorContains(t, err, "Responses API has no stop field", "%s → %s", tt.from.Name(), to.Name())
				req.Stop = nil
				out, err = to.EncodeRequest(req)
			}
			require.NoError(t, err)
			var got map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(out, &got))
			assert.JSONEq(t, tt.wire[to.Name()], string(got["tool_choice"]), "%s → %s", tt.from.Name(), to.Name())
			back, err := to.ParseRequest(out)
			require.NoError(t, err)
			assert.Equal(t, req.ToolChoice, back.ToolChoice, "%s → %s", tt.from.Name(), to.Name())
		}
	}
}
