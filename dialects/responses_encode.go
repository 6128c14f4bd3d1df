package dialects

import (
	"cmp"
	"fmt"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// EncodeRequest writes a non-streaming Responses request. System messages
// stay in place as system items.
func (responsesDialect) EncodeRequest(req Request) ([]byte, error) {
	input := []map[string]any{}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleAssistant:
			input = append(input, responsesUpstreamReasoning(m)...)
			if text := textOf(m.Content); text != "" {
				input = append(input, map[string]any{"type": "message", "role": RoleAssistant, "content": text})
			}
			for _, tc := range m.ToolCalls {
				args := tc.Arguments
				if args == "" {
					args = "{}"
				}
				input = append(input, map[string]any{"type": "function_call", "call_id": tc.ID, "name": tc.Name, "arguments": args})
			}
		case RoleTool:
			input = append(input, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": textOf(m.Content)})
		default:
			input = append(input, map[string]any{"type": "message", "role": m.Role, "content": responsesInputParts(m.Content, "input_text")})
		}
	}
	out := map[string]any{"model": req.Model, "input": input}
	var tools []responsesTool
	for _, t := range req.Tools {
		tools = append(tools, responsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if len(tools) > 0 {
		out["tools"] = tools
	}
	if tc := responsesToolChoice(req.ToolChoice); tc != nil {
		out["tool_choice"] = tc
	}
	if v := req.Sampling.Temperature; v != nil {
		out["temperature"] = *v
	}
	if v := req.Sampling.TopP; v != nil {
		out["top_p"] = *v
	}
	if v := req.Sampling.MaxTokens; v != nil {
		out["max_output_tokens"] = *v
	}
	if r := req.Reasoning; r != nil {
		effort, err := openAIEffort(req)
		if err != nil {
			return nil, fmt.Errorf("encode responses request: %w", err)
		}
		reasoning := map[string]any{"summary": orDefault(r.Summary, "auto")}
		if effort != "" {
			reasoning["effort"] = effort
		}
		out["reasoning"] = reasoning
	}
	if err := cmp.Or(refuseStopResponses(req), refuseChoices(req, "Responses"),
		refuseGeminiSettings(req, "Responses")); err != nil {
		return nil, fmt.Errorf("encode responses request: %w", err)
	}
	if req.Format != nil {
		out["text"] = map[string]any{"format": responsesTextFormat(req.Format)}
	}
	if req.TopLogprobs != nil {
		out["top_logprobs"] = *req.TopLogprobs
	}
	if req.User != "" {
		out["user"] = openAIUser(req.User)
	}
	if len(req.Metadata) > 0 {
		out["metadata"] = req.Metadata
	}
	if req.ServiceTier != "" {
		out["service_tier"] = req.ServiceTier
	}
	if req.PreviousResponseID != "" {
		out["previous_response_id"] = req.PreviousResponseID
	}
	if len(tools) > 0 && req.ParallelToolCalls != nil {
		out["parallel_tool_calls"] = *req.ParallelToolCalls
	}
	store, include := responsesStoreInclude(req)
	if req.Logprobs {
		include = withLogprobs(include)
	}
	if store != nil {
		out["store"] = *store
	}
	if include != nil {
		out["include"] = include
	}
	b, err := jsonv1.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode responses request: %w", err)
	}
	return b, nil
}

// EncodeResponse writes a Response object.
func (responsesDialect) EncodeResponse(resp Response) ([]byte, error) {
	b, err := jsonv1.Marshal(responsesObject(resp, "completed", responsesOutput(resp)))
	if err != nil {
		return nil, fmt.Errorf("encode responses response: %w", err)
	}
	return b, nil
}

func responsesInputParts(parts []Part, textType string) []map[string]any {
	out := []map[string]any{}
	for _, p := range parts {
		switch p.Type {
		case PartText:
			out = append(out, map[string]any{"type": textType, "text": p.Text})
		case PartImage:
			out = append(out, map[string]any{"type": "input_image", "image_url": p.ImageURL, "detail": "auto"})
		}
	}
	return out
}

// responsesOutput is the output items of resp, complete.
func responsesOutput(resp Response) []map[string]any {
	out := append([]map[string]any{}, responsesCallerReasoning(resp.Message)...)
	text := textOf(resp.Message.Content)
	if text != "" || resp.Message.Refusal != "" || len(resp.Message.ToolCalls) == 0 {
		var content []map[string]any
		if text != "" || resp.Message.Refusal == "" {
			content = append(content, map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": wireLogprobs(resp.Logprobs)})
		}
		if resp.Message.Refusal != "" {
			content = append(content, map[string]any{"type": "refusal", "refusal": resp.Message.Refusal})
		}
		out = append(out, map[string]any{"type": "message", "id": "msg_" + orDefault(resp.ID, "evalflow"),
			"status": "completed", "role": RoleAssistant, "content": content})
	}
	for i, tc := range resp.Message.ToolCalls {
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		out = append(out, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", i), "call_id": tc.ID,
			"name": tc.Name, "arguments": args, "status": "completed"})
	}
	return out
}

func responsesObject(resp Response, status string, output []map[string]any) map[string]any {
	u := resp.Usage
	obj := map[string]any{
		"id": orDefault(resp.ID, "resp_evalflow"), "object": "response", "created_at": 0,
		"status": status, "model": resp.Model, "output": output,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"error": nil, "incomplete_details": nil,
		"usage": map[string]any{
			"input_tokens": u.InputTokens, "input_tokens_details": map[string]int{"cached_tokens": u.CacheReadTokens},
			"output_tokens": u.OutputTokens, "output_tokens_details": map[string]int{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens": u.InputTokens + u.OutputTokens,
		},
	}
	switch resp.FinishReason {
	case FinishLength:
		obj["incomplete_details"] = map[string]string{"reason": "max_output_tokens"}
	case FinishContentFilter:
		if resp.Message.Refusal == "" {
			obj["incomplete_details"] = map[string]string{"reason": "content_filter"}
		}
	}
	if obj["incomplete_details"] != nil && status == "completed" {
		obj["status"] = "incomplete"
	}
	return obj
}
