package dialects

import (
	"fmt"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// ParseResponse reads a Message object.
func (anthropicDialect) ParseResponse(body []byte) (Response, error) {
	var ar anthropicResponse
	if err := jsonwire.UnmarshalOwned(body, &ar); err != nil {
		return Response{}, fmt.Errorf("decode anthropic response: %w", err)
	}
	if ar.Type == "error" {
		return Response{}, anthropicDialect{}.ParseError(0, body)
	}
	return anthropicResponseOf(ar), nil
}

type anthropicResponse struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	Role       string           `json:"role"`
	Model      string           `json:"model"`
	Content    []anthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      anthropicUsage   `json:"usage"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// usage counts cached input in InputTokens, as OpenAI does.
func (u anthropicUsage) usage() Usage {
	return Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

func anthropicResponseOf(ar anthropicResponse) Response {
	r := Response{ID: ar.ID, Model: ar.Model, Message: anthropicAssistant(ar.Content),
		FinishReason: anthropicFinish(ar.StopReason), Usage: ar.Usage.usage()}
	if ar.StopReason == "refusal" && r.Message.Refusal == "" {
		r.Message.Refusal = textOf(r.Message.Content)
	}
	return r
}

// anthropicFinish maps a stop_reason to the typed finish reason.
func anthropicFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return FinishLength
	case "tool_use":
		return FinishToolCalls
	case "refusal":
		return FinishContentFilter
	case "":
		return ""
	}
	return FinishStop
}
