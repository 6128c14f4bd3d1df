package dialects

import (
	"fmt"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// ParseResponse reads a GenerateContentResponse: its first candidate. A
// prompt blocked before any candidate is a refusal.
func (geminiDialect) ParseResponse(body []byte) (Response, error) {
	var gr geminiResponse
	if err := jsonwire.UnmarshalOwned(body, &gr); err != nil {
		return Response{}, fmt.Errorf("decode gemini response: %w", err)
	}
	if gr.Error != nil {
		return Response{}, geminiDialect{}.ParseError(0, body)
	}
	return gr.response()
}

// geminiResponse is a GenerateContentResponse, or a chunk of a stream.
type geminiResponse struct {
	Candidates     []geminiCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *geminiUsage  `json:"usageMetadata"`
	ModelVersion  string        `json:"modelVersion"`
	ResponseID    string        `json:"responseId"`
	Error         *geminiStatus `json:"error"`
}

type geminiCandidate struct {
	Content      *geminiContent `json:"content"`
	FinishReason string         `json:"finishReason"`
	Index        int            `json:"index"`
}

type geminiUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
}

// usage counts thoughts in the output tokens, as OpenAI counts reasoning.
func (u *geminiUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{InputTokens: u.PromptTokenCount, OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		ReasoningTokens: u.ThoughtsTokenCount, CacheReadTokens: u.CachedContentTokenCount}
}

// geminiUsageOf is usageMetadata for u.
func geminiUsageOf(u Usage) map[string]int {
	out := map[string]int{
		"promptTokenCount":     u.InputTokens,
		"candidatesTokenCount": max(u.OutputTokens-u.ReasoningTokens, 0),
		"totalTokenCount":      u.InputTokens + u.OutputTokens,
	}
	if u.ReasoningTokens > 0 {
		out["thoughtsTokenCount"] = u.ReasoningTokens
	}
	if u.CacheReadTokens > 0 {
		out["cachedContentTokenCount"] = u.CacheReadTokens
	}
	return out
}

func (gr geminiResponse) response() (Response, error) {
	r := Response{ID: gr.ResponseID, Model: gr.ModelVersion, Usage: gr.UsageMetadata.usage(),
		Message: Message{Role: RoleAssistant}}
	if len(gr.Candidates) == 0 {
		if gr.PromptFeedback != nil && gr.PromptFeedback.BlockReason != "" {
			r.Message.Refusal = "prompt blocked: " + gr.PromptFeedback.BlockReason
			r.FinishReason = FinishContentFilter
		}
		return r, nil
	}
	c := gr.Candidates[0]
	if c.Content != nil {
		m, err := geminiModelTurn(c.Content.Parts, 0)
		if err != nil {
			return Response{}, fmt.Errorf("decode gemini response: %w", err)
		}
		r.Message = m
	}
	r.FinishReason = geminiFinish(c.FinishReason, len(r.Message.ToolCalls) > 0)
	return r, nil
}

// geminiFinish maps a finishReason to the typed finish reason: STOP with
// function calls is tool_calls, the safety reasons content_filter.
func geminiFinish(reason string, calls bool) string {
	switch reason {
	case "":
		return ""
	case "MAX_TOKENS":
		return FinishLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE":
		return FinishContentFilter
	}
	if calls {
		return FinishToolCalls
	}
	return FinishStop
}

// geminiFinishOf is the finishReason of a typed one.
func geminiFinishOf(finish string) string {
	switch finish {
	case FinishLength:
		return "MAX_TOKENS"
	case FinishContentFilter:
		return "SAFETY"
	}
	return "STOP"
}

// geminiResponseOut is resp as a GenerateContentResponse with parts; final
// says whether it ends the answer (finishReason and usage).
func geminiResponseOut(resp Response, parts []geminiPart, final bool) map[string]any {
	if parts == nil {
		parts = []geminiPart{}
	}
	cand := map[string]any{"content": geminiContent{Role: geminiRoleModel, Parts: parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand},
		"modelVersion": resp.Model, "responseId": orDefault(resp.ID, "evalflow")}
	if final {
		cand["finishReason"] = geminiFinishOf(resp.FinishReason)
		out["usageMetadata"] = geminiUsageOf(resp.Usage)
	}
	return out
}
