package dialects

import (
	"encoding/json"
	"strings"
)

// Roles a Message may carry.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
)

// Message is one conversation message in dialect-neutral form.
type Message struct {
	Role       string     `json:"role"`
	Content    []Part     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	// Reasoning is the model's visible reasoning, when the provider returns it.
	Reasoning string `json:"reasoning,omitempty"`
	// Refusal is set when the model declined to answer.
	Refusal string `json:"refusal,omitempty"`
	// Thinking holds reasoning blocks with the provider state a model needs
	// to see again (Anthropic signatures, Responses reasoning items). Their
	// text is also in Reasoning.
	Thinking []Thinking `json:"thinking,omitempty"`
	// ReasoningDetails is a chat provider's reasoning_details, as sent.
	ReasoningDetails json.RawMessage `json:"reasoning_details,omitempty"`
}

// Thinking is one reasoning block and its provider state.
type Thinking struct {
	Text string `json:"text,omitempty"`
	// Signature is an Anthropic thinking block's signature.
	Signature string `json:"signature,omitempty"`
	// Redacted is an Anthropic redacted_thinking block's data.
	Redacted string `json:"redacted,omitempty"`
	// ID is a Responses reasoning item's id.
	ID string `json:"id,omitempty"`
	// Encrypted is a Responses reasoning item's encrypted_content.
	Encrypted string `json:"encrypted,omitempty"`
	// ThoughtSignature is a Gemini part's thoughtSignature, and ThoughtOn
	// the part that bore it: "" a thought part (Text is its text),
	// "text:N" the message's Nth text part, "call:ID" the function call
	// of that tool call id (gemini_request.go).
	ThoughtSignature string `json:"thought_signature,omitempty"`
	ThoughtOn        string `json:"thought_on,omitempty"`
}

// Text joins the message's text parts.
func (m Message) Text() string {
	var s string
	for _, p := range m.Content {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// Part is one piece of message content.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// ImageURL is an http(s) or data: URL for image parts.
	ImageURL string `json:"image_url,omitempty"`
}

// ToolCall is a model's request to call a tool. Arguments is the raw JSON text.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool definition offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Sampling holds the sampling fields a run may set. Nil means "leave as the
// caller sent it".
type Sampling struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
}

// Usage counts tokens for one model call. InputTokens includes cached ones.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// Finish reasons of a Response, in chat completions' words whatever the
// dialect said.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// ReasoningConfig is what a request asks of the model's reasoning. The
// mapping between Anthropic budgets and OpenAI efforts is in carry.go.
type ReasoningConfig struct {
	// Effort is none, minimal, low, medium, high or xhigh (OpenAI's words).
	Effort string `json:"effort,omitempty"`
	// BudgetTokens is Anthropic's thinking budget.
	BudgetTokens int `json:"budget_tokens,omitempty"`
	// Adaptive is Anthropic's adaptive thinking: the model decides how
	// much to think, at Effort when output_config set one.
	Adaptive bool `json:"adaptive,omitempty"`
	// Summary is the Responses reasoning summary asked for: auto, concise
	// or detailed.
	Summary string `json:"summary,omitempty"`
}

// Request is a model call in dialect-neutral form.
type Request struct {
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	Sampling Sampling  `json:"sampling"`
	Stream   bool      `json:"stream,omitempty"`
	// Reasoning is set when the caller asked for reasoning or thinking.
	Reasoning *ReasoningConfig `json:"reasoning,omitempty"`
	// ToolChoice is set when the caller constrained tool use.
	ToolChoice *ToolChoice `json:"tool_choice,omitempty"`
	// Stop holds the caller's stop sequences.
	Stop []string `json:"stop,omitempty"`
	// ParallelToolCalls is set when the caller allowed or forbade several
	// tool calls in one answer (Anthropic: disable_parallel_tool_use).
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
	// Store and Include are a Responses caller's store and include.
	Store   *bool    `json:"store,omitempty"`
	Include []string `json:"include,omitempty"`
	// PreviousResponseID is a Responses caller's previous_response_id:
	// only a Responses upstream knows the response it names.
	PreviousResponseID string `json:"previous_response_id,omitempty"`
	// Format is the structured output asked for: chat's response_format,
	// Responses' text.format, Anthropic's output_config.format.
	Format *Format `json:"format,omitempty"`
	// N is how many choices a chat caller asked for; 0 is one.
	N int `json:"n,omitempty"`
	// Logprobs asks for the output tokens' log probabilities, with
	// TopLogprobs alternatives each (chat's logprobs and top_logprobs;
	// Responses' include message.output_text.logprobs and top_logprobs).
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs *int `json:"top_logprobs,omitempty"`
	// User names the caller's end user: OpenAI's user, Anthropic's
	// metadata.user_id.
	User string `json:"user,omitempty"`
	// Metadata is an OpenAI caller's metadata object, as sent.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// ServiceTier is the processing tier asked for, in OpenAI's words
	// (auto, default, flex, scale, priority): Anthropic's standard_only
	// reads as default.
	ServiceTier string `json:"service_tier,omitempty"`
	// StreamUsage is a streaming chat caller's
	// stream_options.include_usage: only then does its stream end with
	// a usage chunk.
	StreamUsage bool `json:"stream_usage,omitempty"`

	// Gemini holds a Gemini caller's settings that only a Gemini
	// upstream takes; the other dialects refuse them by name.
	Gemini *GeminiSettings `json:"gemini,omitempty"`

	// From is the dialect the request was read in, its caller's: a
	// setting an upstream cannot take is refused in that dialect's words.
	From string `json:"-"`
	// Claude, when set, is what the Anthropic upstream's model takes;
	// nil reads it from Model (ClaudeTraitsOf).
	Claude *ClaudeTraits `json:"-"`
}

// GeminiSettings are the settings of a Gemini request that no other
// dialect has, as the caller sent them.
type GeminiSettings struct {
	// TopK is generationConfig.topK.
	TopK *float64 `json:"top_k,omitempty"`
	// SafetySettings is safetySettings.
	SafetySettings json.RawMessage `json:"safety_settings,omitempty"`
	// ResponseSchema is generationConfig.responseSchema, an OpenAPI
	// schema rather than a JSON schema (responseJsonSchema is Format).
	ResponseSchema json.RawMessage `json:"response_schema,omitempty"`
	// ResponseMimeType is a generationConfig.responseMimeType other than
	// text/plain and application/json (text/x.enum).
	ResponseMimeType string `json:"response_mime_type,omitempty"`
	// Tools are the tools other than functionDeclarations (googleSearch,
	// codeExecution, …).
	Tools []json.RawMessage `json:"tools,omitempty"`
	// FunctionCalling is a toolConfig.functionCallingConfig that a
	// ToolChoice cannot say: mode VALIDATED, or ANY among several
	// allowedFunctionNames.
	FunctionCalling json.RawMessage `json:"function_calling,omitempty"`
}

// Format is a structured output asked of the model.
type Format struct {
	// Type is text, json_object or json_schema.
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Format types.
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Tool choice modes, in OpenAI's words.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
)

// ToolChoice constrains tool use: a mode, or one tool by name.
type ToolChoice struct {
	// Mode is auto, none or required; with Name set it is required.
	Mode string `json:"mode"`
	// Name forces that one tool.
	Name string `json:"name,omitempty"`
}

// Response is a model's answer in dialect-neutral form.
type Response struct {
	ID           string  `json:"id,omitempty"`
	Model        string  `json:"model,omitempty"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason,omitempty"`
	Usage        Usage   `json:"usage"`
	// Logprobs are the log probabilities of the answer's text tokens, for
	// a caller that asked for them (Request.Logprobs). Traces keep token
	// data compactly apart (Tokens), not here.
	Logprobs []TokenLogprob `json:"-"`
}

// TokenLogprob is an output token's log probability, with the likeliest
// tokens at its place when asked for (Request.TopLogprobs). Chat
// completions and Responses write it alike.
type TokenLogprob struct {
	Token   string       `json:"token"`
	Logprob float64      `json:"logprob"`
	Bytes   []int        `json:"bytes,omitempty"`
	Top     []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one of the likeliest tokens at a place.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

// wireLogprobs is ls as OpenAI writes them: a list, and each token's
// alternatives a list, empty rather than null.
func wireLogprobs(ls []TokenLogprob) []TokenLogprob {
	out := make([]TokenLogprob, len(ls))
	for i, l := range ls {
		if l.Top == nil {
			l.Top = []TopLogprob{}
		}
		out[i] = l
	}
	return out
}

// textOf joins the text parts of parts.
func textOf(parts []Part) string {
	if len(parts) == 1 && parts[0].Type == PartText {
		return parts[0].Text // one part, most messages: no copy
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// joinReasoning joins the text of thinking blocks.
func joinReasoning(ts []Thinking) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Text)
	}
	return b.String()
}

// thinkingOf is m's reasoning as blocks: its own, or one block of its
// Reasoning text.
func thinkingOf(m Message) []Thinking {
	if len(m.Thinking) == 0 && m.Reasoning != "" {
		return []Thinking{{Text: m.Reasoning}}
	}
	return m.Thinking
}

// EstimateTokens is the translate arm's answer to count_tokens: the
// characters of every message, tool definition and tool call, over four,
// rounded up. It is meant for compaction triggers, not billing.
func EstimateTokens(req Request) int {
	chars := 0
	for _, m := range req.Messages {
		chars += len(textOf(m.Content)) + len(m.Reasoning) + len(m.Refusal)
		for _, tc := range m.ToolCalls {
			chars += len(tc.Name) + len(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		chars += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return (chars + 3) / 4
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
