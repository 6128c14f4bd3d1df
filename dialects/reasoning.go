package dialects

// Reasoning settings across dialects. OpenAI callers and upstreams speak of
// an effort (chat's reasoning_effort, Responses' reasoning.effort);
// Anthropic of thinking, either a budget (thinking.budget_tokens, the
// older Claude models) or adaptive with an effort (output_config.effort,
// Claude Opus and Sonnet 4.6 and later). An effort the upstream cannot
// express is refused, never sent as something else; a caller's token cap
// is never raised to make room for thinking.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The efforts each kind of upstream takes. An Anthropic model with
// adaptive thinking takes minimal as low; one that takes only a budget
// has none for max.
var (
	openAIEfforts    = []string{"none", "minimal", "low", "medium", "high", "xhigh"}
	anthropicEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}
)

// effortBudget is the Anthropic thinking budget of each effort, for models
// that take only a budget, and back: a budget below 4096 is low, below
// 16384 medium, above high. It is also the room for thinking a request
// without a token cap gets.
var effortBudget = map[string]int{"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768, "max": 32768}

// MinThinkingBudget is the least thinking budget Anthropic takes.
const MinThinkingBudget = 1024

// ClaudeTraits is what a Claude model takes of a translated request's
// settings.
type ClaudeTraits struct {
	// AdaptiveThinking: thinking {type: adaptive} with
	// output_config.effort. Without it, thinking {type: enabled,
	// budget_tokens}.
	AdaptiveThinking bool
	// StructuredOutputs: output_config.format with a JSON schema.
	StructuredOutputs bool
}

// ClaudeTraitsOf is what the Claude model named model takes, by its
// version: adaptive thinking from 4.6 (Opus 4.6, Sonnet 4.6 and later;
// Opus 4.7 takes nothing else), structured outputs from 4.5. A Claude name
// without a version is taken for a family newer than this table; a name
// that is not Claude's (a proxy's alias) for a model that takes only a
// thinking budget and no output format, which every Claude model before
// Opus 4.7 accepts.
func ClaudeTraitsOf(model string) ClaudeTraits {
	v, claude := claudeVersion(model)
	switch {
	case !claude:
		return ClaudeTraits{}
	case v == [2]int{} || v[0] > 4 || v[0] == 4 && v[1] >= 6:
		return ClaudeTraits{AdaptiveThinking: true, StructuredOutputs: true}
	case v[0] == 4 && v[1] == 5:
		return ClaudeTraits{StructuredOutputs: true}
	}
	return ClaudeTraits{}
}

// claudeVersion reads the version of a Claude model's name, whichever way
// its provider spells it (claude-3-7-sonnet-20250219,
// claude-sonnet-4-20250514, anthropic.claude-opus-4-6-v1,
// anthropic/claude-opus-4.6, claude-haiku-4-5@20251001): the first number
// after "claude", and the one after it unless that is a date. claude is
// false when the name is not a Claude model's.
func claudeVersion(model string) (v [2]int, claude bool) {
	_, rest, claude := strings.Cut(strings.ToLower(model), "claude")
	if !claude {
		return v, false
	}
	words := strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune("-._@:/ ", r) })
	for i, w := range words {
		major, err := strconv.Atoi(w)
		if err != nil {
			continue
		}
		v[0] = major
		if i+1 < len(words) && len(words[i+1]) <= 2 {
			v[1], _ = strconv.Atoi(words[i+1])
		}
		return v, true
	}
	return v, true
}

// claude is what the request's Anthropic model takes.
func (req Request) claude() ClaudeTraits {
	if req.Claude != nil {
		return *req.Claude
	}
	return ClaudeTraitsOf(req.Model)
}

// openAIEffort is the reasoning effort an OpenAI upstream (chat or
// Responses) gets: the caller's own, medium for adaptive thinking that
// named none, or the effort of an Anthropic budget; "" when the caller
// named no effort (a Responses caller asking only for a summary). An
// effort OpenAI has no word for (Anthropic's max) is refused.
func openAIEffort(req Request) (string, error) {
	r := req.Reasoning
	e := r.Effort
	switch {
	case e != "":
	case r.Adaptive:
		return "medium", nil
	case r.BudgetTokens >= effortBudget["high"]:
		return "high", nil
	case r.BudgetTokens >= effortBudget["medium"]:
		return "medium", nil
	case r.BudgetTokens > 0:
		return "low", nil
	default:
		return "", nil
	}
	if !slices.Contains(openAIEfforts, e) {
		return "", &FieldError{Field: req.field("reasoning_effort"),
			Reason: fmt.Sprintf("%q is no OpenAI reasoning effort (none, minimal, low, medium, high or xhigh)", e)}
	}
	return e, nil
}

// anthropicThinkingOut is an Anthropic request's thinking field.
type anthropicThinkingOut struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens,omitempty"`
}

// anthropicThinking is what the request's reasoning becomes toward
// Anthropic, by what its model takes (ClaudeTraits): the thinking field,
// output_config.effort, and max_tokens. max_tokens is the caller's cap
// when it set one, which the thinking budget must fit under, or the
// request is refused; without a cap it is DefaultAnthropicMaxTokens plus
// room for the effort's thinking.
func anthropicThinking(req Request) (thinking *anthropicThinkingOut, effort string, maxTokens int, err error) {
	maxTokens = DefaultAnthropicMaxTokens
	capped := req.Sampling.MaxTokens != nil
	if capped {
		maxTokens = *req.Sampling.MaxTokens
	}
	r := req.Reasoning
	if r == nil || r.Effort == "none" {
		return nil, "", maxTokens, nil
	}
	if r.Effort != "" && !slices.Contains(anthropicEfforts, r.Effort) {
		return nil, "", 0, &FieldError{Field: req.field("reasoning_effort"),
			Reason: fmt.Sprintf("%q is no effort Anthropic takes (none, minimal, low, medium, high, xhigh or max)", r.Effort)}
	}
	traits := req.claude()
	switch {
	case traits.AdaptiveThinking && (r.Effort != "" || r.Adaptive):
		if !capped {
			maxTokens += effortBudget[orDefault(r.Effort, "medium")]
		}
		if r.Effort == "minimal" {
			return &anthropicThinkingOut{Type: "adaptive"}, "low", maxTokens, nil
		}
		return &anthropicThinkingOut{Type: "adaptive"}, r.Effort, maxTokens, nil
	case r.Effort == "" && r.BudgetTokens == 0 && !r.Adaptive:
		return nil, "", maxTokens, nil // reasoning settings naming no effort: a summary only
	case r.Effort == "max":
		return nil, "", 0, &FieldError{Field: req.field("reasoning_effort"),
			Reason: fmt.Sprintf(`"max" needs adaptive thinking, which %s does not take (it takes a thinking budget: minimal, low, medium, high or xhigh)`, req.Model)}
	}
	budget := r.BudgetTokens
	if budget == 0 {
		budget = effortBudget[orDefault(r.Effort, "medium")]
	}
	if !capped {
		return &anthropicThinkingOut{Type: "enabled", BudgetTokens: budget}, "", budget + DefaultAnthropicMaxTokens, nil
	}
	budget = min(budget, maxTokens-1)
	if budget < MinThinkingBudget {
		caps := req.field("max_completion_tokens")
		return nil, "", 0, &FieldError{Field: req.field("reasoning_effort"),
			Reason: fmt.Sprintf("with %s %d there is no room for Anthropic's least thinking budget, %d tokens below max_tokens "+
				"(raise %s above %d, or send no %s)", caps, maxTokens, MinThinkingBudget, caps, MinThinkingBudget, req.field("reasoning_effort"))}
	}
	return &anthropicThinkingOut{Type: "enabled", BudgetTokens: budget}, "", maxTokens, nil
}

// anthropicReasoningOf reads Anthropic's thinking and output_config.effort.
// An effort is the effort, with thinking or without (it then bounds the
// answer's tokens alone: toward OpenAI it is the reasoning effort);
// thinking without one is its budget, or adaptive.
func anthropicReasoningOf(typ string, budget int, effort string) *ReasoningConfig {
	switch typ {
	case "enabled":
		return &ReasoningConfig{BudgetTokens: budget, Effort: effort}
	case "adaptive":
		return &ReasoningConfig{Adaptive: true, Effort: effort}
	}
	if effort != "" {
		return &ReasoningConfig{Effort: effort}
	}
	return nil
}
