package dialects

import (
	"fmt"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

func (chatDialect) ParseResponse(body []byte) (Response, error) { return ParseChatResponse(body) }

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int           `json:"index"`
		Message      chatMessage   `json:"message"`
		FinishReason string        `json:"finish_reason"`
		Logprobs     *chatLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

type chatUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	if u.PromptTokensDetails != nil {
		out.CacheReadTokens = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// ParseChatResponse reads a non-streaming chat completions response body. Only
// the first choice is kept.
func ParseChatResponse(body []byte) (Response, error) {
	var cr chatResponse
	if err := jsonwire.UnmarshalOwned(body, &cr); err != nil {
		return Response{}, fmt.Errorf("decode chat response: %w", err)
	}
	resp := Response{ID: cr.ID, Model: cr.Model, Usage: cr.Usage.usage()}
	for _, c := range cr.Choices {
		if c.Index != 0 {
			continue
		}
		m, err := c.Message.message()
		if err != nil {
			return Response{}, fmt.Errorf("decode chat response: %w", err)
		}
		if m.Role == "" {
			m.Role = RoleAssistant
		}
		resp.Message = m
		resp.FinishReason = c.FinishReason
		resp.Logprobs = c.Logprobs.content()
		break
	}
	return resp, nil
}

// chatLogprobs is a choice's logprobs: its content tokens' (a refusal's
// are not kept).
type chatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

func (l *chatLogprobs) content() []TokenLogprob {
	if l == nil {
		return nil
	}
	return l.Content
}

// chatLogprobsOut is a choice's logprobs as written: nil when there are
// none.
func chatLogprobsOut(ls []TokenLogprob) map[string]any {
	if len(ls) == 0 {
		return nil
	}
	return map[string]any{"content": wireLogprobs(ls), "refusal": nil}
}
