package dialects

// The settings of a request besides its messages, tools and reasoning,
// across dialects: structured output, choices, log probabilities, the end
// user, metadata and the service tier. Each is sent in the upstream's
// words, or refused in the caller's (FieldError) when the upstream's
// dialect or model has no such setting.

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// FieldError is a field of a caller's request that the upstream's dialect
// or model has no way to carry: the request is refused rather than sent
// without it.
type FieldError struct {
	// Field is the field as the caller's dialect names it.
	Field string
	// Reason says why, and what to send instead.
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + " cannot be sent: " + e.Reason }

// callerNames are the names of the settings in the Responses and Anthropic
// dialects, by their chat names.
var callerNames = map[string]map[string]string{
	NameResponses: {
		"response_format": "text.format", "logprobs": `include "message.output_text.logprobs"`,
		"reasoning_effort": "reasoning.effort", "max_completion_tokens": "max_output_tokens",
	},
	NameAnthropic: {
		"response_format": "output_config.format", "user": "metadata.user_id", "stop": "stop_sequences",
		"reasoning_effort": "output_config.effort", "max_completion_tokens": "max_tokens",
	},
	NameGemini: {
		"response_format": "generationConfig.responseJsonSchema", "stop": "generationConfig.stopSequences",
		"reasoning_effort": "generationConfig.thinkingConfig.thinkingLevel", "n": "generationConfig.candidateCount",
		"max_completion_tokens": "generationConfig.maxOutputTokens",
	},
}

// field is the name of the setting chat calls name in the caller's
// dialect.
func (req Request) field(name string) string {
	if n, ok := callerNames[req.From][name]; ok {
		return n
	}
	return name
}

// maxOpenAIUser is the longest user OpenAI takes.
const maxOpenAIUser = 64

// openAIUser is the user an OpenAI upstream gets: the caller's, or, when
// it is longer than OpenAI takes (claude-code's metadata.user_id is about
// 150 characters), the hex of its SHA-256, as stable and as distinct.
func openAIUser(user string) string {
	if len(user) <= maxOpenAIUser {
		return user
	}
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:])
}

// IncludeLogprobs is the Responses include value that returns the output
// text's log probabilities.
const IncludeLogprobs = "message.output_text.logprobs"

// refuseChoices refuses more than one choice toward an upstream that
// answers with one.
func refuseChoices(req Request, upstream string) error {
	if req.N <= 1 {
		return nil
	}
	return &FieldError{Field: req.field("n"),
		Reason: fmt.Sprintf("%d choices were asked for, and the %s API answers with one (send n: 1, or use a chat upstream)", req.N, upstream)}
}

// refuseGeminiSettings refuses a Gemini caller's settings that only a
// Gemini upstream takes, naming the first one set.
func refuseGeminiSettings(req Request, upstream string) error {
	g := req.Gemini
	if g == nil {
		return nil
	}
	field := ""
	switch {
	case g.TopK != nil:
		field = "generationConfig.topK"
	case len(g.SafetySettings) > 0:
		field = "safetySettings"
	case g.ResponseSchema != nil:
		field = "generationConfig.responseSchema"
	case g.ResponseMimeType != "":
		field = "generationConfig.responseMimeType"
	case len(g.Tools) > 0:
		field = "tools"
	case g.FunctionCalling != nil:
		field = "toolConfig.functionCallingConfig"
	default:
		return nil
	}
	reason := fmt.Sprintf("the %s API has no such setting (remove it, or use a gemini upstream)", upstream)
	switch field {
	case "tools":
		reason = fmt.Sprintf("Gemini's own tools (googleSearch, codeExecution, …) have no %s counterpart: declare functions only", upstream)
	case "generationConfig.responseSchema":
		reason = "an OpenAPI schema reaches other APIs only as a JSON schema (send responseJsonSchema)"
	case "toolConfig.functionCallingConfig":
		reason = fmt.Sprintf("the %s API can force one function or any, not one of several nor VALIDATED", upstream)
	}
	return &FieldError{Field: field, Reason: reason}
}

// anthropicRefusals refuses the settings Anthropic has no field for.
func anthropicRefusals(req Request) error {
	if err := cmp.Or(refuseChoices(req, "Anthropic"), refuseGeminiSettings(req, "Anthropic")); err != nil {
		return err
	}
	switch {
	case req.Logprobs:
		return &FieldError{Field: req.field("logprobs"), Reason: "Anthropic returns no log probabilities"}
	case req.TopLogprobs != nil && *req.TopLogprobs > 0:
		return &FieldError{Field: req.field("top_logprobs"), Reason: "Anthropic returns no log probabilities"}
	case len(req.Metadata) > 0 && !bytes.Equal(req.Metadata, []byte("{}")):
		return &FieldError{Field: req.field("metadata"), Reason: "Anthropic's metadata holds only user_id (send user instead)"}
	}
	return nil
}

// anthropicServiceTier is Anthropic's service_tier for an OpenAI one:
// auto, and standard_only for default; OpenAI's other tiers have no
// Anthropic counterpart.
func anthropicServiceTier(req Request) (string, error) {
	switch req.ServiceTier {
	case "", "auto":
		return req.ServiceTier, nil
	case "default":
		return "standard_only", nil
	}
	return "", &FieldError{Field: req.field("service_tier"),
		Reason: fmt.Sprintf("%q has no Anthropic service tier (Anthropic takes auto, and standard_only for default)", req.ServiceTier)}
}

// serviceTierOf reads Anthropic's service_tier in OpenAI's words.
func serviceTierOf(anthropic string) string {
	if anthropic == "standard_only" {
		return "default"
	}
	return anthropic
}

// anthropicFormat is Anthropic's output_config.format for the request's
// structured output: a JSON schema, to a model that takes one.
func anthropicFormat(req Request) (map[string]any, error) {
	f := req.Format
	if f == nil || f.Type == FormatText {
		return nil, nil
	}
	name := req.field("response_format")
	if f.Type != FormatJSONSchema {
		return nil, &FieldError{Field: name,
			Reason: fmt.Sprintf("Anthropic has no %s output, only a JSON schema's (send json_schema)", f.Type)}
	}
	if !req.claude().StructuredOutputs {
		return nil, &FieldError{Field: name,
			Reason: fmt.Sprintf("%s takes no structured output (Claude 4.5 models and later do)", req.Model)}
	}
	return map[string]any{"type": FormatJSONSchema, "schema": f.Schema}, nil
}

// formatOfAnthropic reads Anthropic's output_config.format (or the beta's
// output_format): a JSON schema the answer follows strictly.
func formatOfAnthropic(raw json.RawMessage) *Format {
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f.Type == "" {
		return nil
	}
	strict := true
	return &Format{Type: f.Type, Schema: f.Schema, Strict: &strict}
}

// chatResponseFormat is chat's response_format for f.
func chatResponseFormat(f *Format) map[string]any {
	if f == nil {
		return nil
	}
	if f.Type != FormatJSONSchema {
		return map[string]any{"type": f.Type}
	}
	return map[string]any{"type": FormatJSONSchema, "json_schema": formatSchema(f)}
}

// responsesTextFormat is Responses' text.format for f.
func responsesTextFormat(f *Format) map[string]any {
	if f.Type != FormatJSONSchema {
		return map[string]any{"type": f.Type}
	}
	out := formatSchema(f)
	out["type"] = FormatJSONSchema
	return out
}

// formatSchema is a JSON schema format's fields as OpenAI names them; a
// schema needs a name there, "response" when the caller gave none.
func formatSchema(f *Format) map[string]any {
	out := map[string]any{"name": orDefault(f.Name, "response")}
	if f.Description != "" {
		out["description"] = f.Description
	}
	if len(f.Schema) > 0 {
		out["schema"] = f.Schema
	}
	if f.Strict != nil {
		out["strict"] = *f.Strict
	}
	return out
}

// withLogprobs is include with the Responses value that returns log
// probabilities.
func withLogprobs(include []string) []string {
	if slices.Contains(include, IncludeLogprobs) {
		return include
	}
	return append(slices.Clip(include), IncludeLogprobs)
}
