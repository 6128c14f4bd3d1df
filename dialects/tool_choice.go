package dialects

import (
	"bytes"
	"encoding/json"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// openAIToolChoice reads chat's and Responses' tool_choice: a mode string,
// {"type":"function","function":{"name"}} (chat) or {"type":"function","name"}
// (Responses). Anything else is left out.
func openAIToolChoice(raw json.RawMessage) *ToolChoice {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var mode string
	if jsonwire.Unmarshal(raw, &mode) == nil {
		if mode == ToolChoiceAuto || mode == ToolChoiceNone || mode == ToolChoiceRequired {
			return &ToolChoice{Mode: mode}
		}
		return nil
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if jsonwire.Unmarshal(raw, &obj) != nil || obj.Type != "function" {
		return nil
	}
	name := obj.Name
	if name == "" {
		name = obj.Function.Name
	}
	if name == "" {
		return nil
	}
	return &ToolChoice{Mode: ToolChoiceRequired, Name: name}
}

// chatToolChoice writes a tool choice for chat completions.
func chatToolChoice(tc *ToolChoice) any {
	if tc == nil {
		return nil
	}
	if tc.Name != "" {
		return map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
	}
	return tc.Mode
}

// responsesToolChoice writes a tool choice for the Responses API.
func responsesToolChoice(tc *ToolChoice) any {
	if tc == nil {
		return nil
	}
	if tc.Name != "" {
		return map[string]string{"type": "function", "name": tc.Name}
	}
	return tc.Mode
}

// anthropicToolChoiceOf reads Anthropic's tool_choice: {"type":"auto"|"any"|"tool"|"none","name"}.
func anthropicToolChoiceOf(raw json.RawMessage) *ToolChoice {
	var obj struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if len(bytes.TrimSpace(raw)) == 0 || jsonwire.Unmarshal(raw, &obj) != nil {
		return nil
	}
	switch obj.Type {
	case "auto":
		return &ToolChoice{Mode: ToolChoiceAuto}
	case "none":
		return &ToolChoice{Mode: ToolChoiceNone}
	case "any":
		return &ToolChoice{Mode: ToolChoiceRequired}
	case "tool":
		if obj.Name != "" {
			return &ToolChoice{Mode: ToolChoiceRequired, Name: obj.Name}
		}
	}
	return nil
}

// anthropicToolChoice writes a tool choice for Anthropic.
func anthropicToolChoice(tc *ToolChoice) map[string]string {
	switch {
	case tc == nil:
		return nil
	case tc.Name != "":
		return map[string]string{"type": "tool", "name": tc.Name}
	case tc.Mode == ToolChoiceRequired:
		return map[string]string{"type": "any"}
	case tc.Mode == ToolChoiceNone:
		return map[string]string{"type": "none"}
	}
	return map[string]string{"type": "auto"}
}
