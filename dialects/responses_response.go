package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// ParseResponse reads a Response object. A failed response is an error.
func (responsesDialect) ParseResponse(body []byte) (Response, error) {
	var rr responsesResponse
	if err := jsonwire.UnmarshalOwned(body, &rr); err != nil {
		return Response{}, fmt.Errorf("decode responses response: %w", err)
	}
	return responsesResponseOf(rr)
}

type responsesResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Status            string          `json:"status"`
	Model             string          `json:"model"`
	Output            []responsesItem `json:"output"`
	Usage             *responsesUsage `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func responsesResponseOf(rr responsesResponse) (Response, error) {
	if rr.Status == "failed" && rr.Error != nil {
		return Response{}, &ChatError{Type: rr.Error.Code, Message: rr.Error.Message}
	}
	r := Response{ID: rr.ID, Model: rr.Model, Message: Message{Role: RoleAssistant}}
	for _, it := range rr.Output {
		switch it.Type {
		case "message":
			parts, refusal, err := responsesContent(it.Content)
			if err != nil {
				return Response{}, fmt.Errorf("decode responses response: %w", err)
			}
			r.Message.Content = append(r.Message.Content, parts...)
			r.Message.Refusal += refusal
			r.Logprobs = append(r.Logprobs, responsesLogprobs(it.Content)...)
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			r.Message.ToolCalls = append(r.Message.ToolCalls, ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case "reasoning":
			t, err := it.thinking()
			if err != nil {
				return Response{}, fmt.Errorf("decode responses response: %w", err)
			}
			r.Message.Thinking = append(r.Message.Thinking, t)
		}
	}
	r.Message.Reasoning = joinReasoning(r.Message.Thinking)
	switch {
	case rr.Status == "incomplete" && rr.IncompleteDetails != nil && rr.IncompleteDetails.Reason == "content_filter":
		r.FinishReason = FinishContentFilter
	case rr.Status == "incomplete":
		r.FinishReason = FinishLength
	case len(r.Message.ToolCalls) > 0:
		r.FinishReason = FinishToolCalls
	case r.Message.Refusal != "":
		r.FinishReason = FinishContentFilter
	case rr.Status != "":
		r.FinishReason = FinishStop
	}
	if u := rr.Usage; u != nil {
		r.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.InputTokensDetails.CachedTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
	}
	return r, nil
}

// responsesLogprobs are the log probabilities of a message's output_text
// parts, which are there only when the caller asked for them.
func responsesLogprobs(content json.RawMessage) []TokenLogprob {
	if !bytes.Contains(content, []byte(`"logprob"`)) {
		return nil // no token's: most answers, whose parts have an empty list
	}
	var parts []struct {
		Type     string         `json:"type"`
		Logprobs []TokenLogprob `json:"logprobs"`
	}
	if jsonwire.Unmarshal(content, &parts) != nil {
		return nil
	}
	var out []TokenLogprob
	for _, p := range parts {
		if p.Type == "output_text" {
			out = append(out, p.Logprobs...)
		}
	}
	return out
}
