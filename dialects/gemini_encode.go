package dialects

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// EncodeRequest writes a generateContent request (the model goes in the
// route, GeminiPath). System and developer messages, wherever they are,
// become systemInstruction parts in order; tool results become
// functionResponse parts of a user turn; consecutive turns of a role
// merge.
func (geminiDialect) EncodeRequest(req Request) ([]byte, error) {
	if err := cmp.Or(refusePreviousResponse(req), geminiRefusals(req)); err != nil {
		return nil, fmt.Errorf("encode gemini request: %w", err)
	}
	gc, err := geminiGenerationConfigOf(req)
	if err != nil {
		return nil, fmt.Errorf("encode gemini request: %w", err)
	}
	out := geminiRequestOut{Contents: []geminiContent{}, GenerationConfig: gc}
	names := map[string]string{} // tool call id → function name
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem, RoleDeveloper:
			if out.SystemInstruction == nil {
				out.SystemInstruction = &geminiContent{}
			}
			out.SystemInstruction.Parts = append(out.SystemInstruction.Parts, geminiParts(m.Content)...)
		case RoleAssistant:
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
			out.add(geminiRoleModel, geminiModelParts(m, false))
		case RoleTool:
			out.add(RoleUser, []geminiPart{geminiFunctionResponsePart(m, names)})
		default:
			if parts := geminiParts(m.Content); len(parts) > 0 {
				out.add(RoleUser, parts)
			}
		}
	}
	if len(req.Tools) > 0 {
		var fs []geminiFunction
		for _, t := range req.Tools {
			fs = append(fs, geminiFunction{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.Parameters})
		}
		out.Tools = append(out.Tools, json.RawMessage(mustJSON(geminiTool{FunctionDeclarations: fs})))
	}
	out.settings(req)
	b, err := jsonv1.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode gemini request: %w", err)
	}
	return b, nil
}

// geminiRequestOut is a generateContent request, as written.
type geminiRequestOut struct {
	Contents          []geminiContent   `json:"contents"`
	SystemInstruction *geminiContent    `json:"systemInstruction,omitempty"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	ToolConfig        map[string]any    `json:"toolConfig,omitempty"`
	GenerationConfig  map[string]any    `json:"generationConfig,omitempty"`
	SafetySettings    json.RawMessage   `json:"safetySettings,omitempty"`
}

// add appends parts to the conversation, to the last turn when it is
// role's.
func (out *geminiRequestOut) add(role string, parts []geminiPart) {
	if len(parts) == 0 {
		return
	}
	if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
		out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
		return
	}
	out.Contents = append(out.Contents, geminiContent{Role: role, Parts: parts})
}

// settings writes the tool choice and a Gemini caller's own settings.
func (out *geminiRequestOut) settings(req Request) {
	if fc := geminiToolChoice(req.ToolChoice); fc != nil {
		out.ToolConfig = map[string]any{"functionCallingConfig": fc}
	}
	g := req.Gemini
	if g == nil {
		return
	}
	out.Tools = append(out.Tools, g.Tools...)
	if g.FunctionCalling != nil {
		out.ToolConfig = map[string]any{"functionCallingConfig": g.FunctionCalling}
	}
	out.SafetySettings = g.SafetySettings
}

// geminiToolChoice is functionCallingConfig for a tool choice.
func geminiToolChoice(tc *ToolChoice) map[string]any {
	switch {
	case tc == nil:
		return nil
	case tc.Name != "":
		return map[string]any{"mode": "ANY", "allowedFunctionNames": []string{tc.Name}}
	case tc.Mode == ToolChoiceRequired:
		return map[string]any{"mode": "ANY"}
	case tc.Mode == ToolChoiceNone:
		return map[string]any{"mode": "NONE"}
	}
	return map[string]any{"mode": "AUTO"}
}

// geminiGenerationConfigOf is generationConfig for req: sampling, stop
// sequences, candidates, structured output and thinking.
func geminiGenerationConfigOf(req Request) (map[string]any, error) {
	gc := map[string]any{}
	set := func(k string, v any, ok bool) {
		if ok {
			gc[k] = v
		}
	}
	s := req.Sampling
	set("temperature", deref(s.Temperature), s.Temperature != nil)
	set("topP", deref(s.TopP), s.TopP != nil)
	set("maxOutputTokens", deref(s.MaxTokens), s.MaxTokens != nil)
	set("seed", deref(s.Seed), s.Seed != nil)
	set("stopSequences", req.Stop, len(req.Stop) > 0)
	set("candidateCount", req.N, req.N > 0)
	if g := req.Gemini; g != nil {
		set("topK", deref(g.TopK), g.TopK != nil)
		set("responseMimeType", g.ResponseMimeType, g.ResponseMimeType != "")
		if g.ResponseSchema != nil {
			gc["responseMimeType"], gc["responseSchema"] = geminiJSON, g.ResponseSchema
		}
	}
	if f := req.Format; f != nil {
		switch f.Type {
		case FormatText:
			gc["responseMimeType"] = geminiText
		case FormatJSONObject:
			gc["responseMimeType"] = geminiJSON
		case FormatJSONSchema:
			gc["responseMimeType"], gc["responseJsonSchema"] = geminiJSON, f.Schema
		}
	}
	tc, err := geminiThinkingOf(req)
	if err != nil {
		return nil, err
	}
	set("thinkingConfig", tc, tc != nil)
	if len(gc) == 0 {
		return nil, nil
	}
	return gc, nil
}

// deref is *p.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// geminiLevels are the thinking levels Gemini takes.
var geminiLevels = []string{"minimal", "low", "medium", "high"}

// geminiThinkingOf is thinkingConfig for the request's reasoning: an
// effort is a thinkingLevel (none a budget of 0), an Anthropic budget the
// thinkingBudget, adaptive thinking the dynamic budget -1; a summary asked
// for is includeThoughts.
func geminiThinkingOf(req Request) (map[string]any, error) {
	r := req.Reasoning
	if r == nil {
		return nil, nil
	}
	tc := map[string]any{}
	switch {
	case r.Effort == "none":
		tc["thinkingBudget"] = 0
	case r.Effort != "":
		if !slices.Contains(geminiLevels, r.Effort) {
			return nil, &FieldError{Field: req.field("reasoning_effort"),
				Reason: fmt.Sprintf("%q is no Gemini thinking level (minimal, low, medium or high)", r.Effort)}
		}
		tc["thinkingLevel"] = r.Effort
	case r.BudgetTokens > 0:
		tc["thinkingBudget"] = r.BudgetTokens
	case r.Adaptive:
		tc["thinkingBudget"] = -1
	}
	if r.Summary != "" {
		tc["includeThoughts"] = true
	}
	if len(tc) == 0 {
		return nil, nil
	}
	return tc, nil
}

// geminiRefusals refuses the settings Gemini has no field for.
func geminiRefusals(req Request) error {
	switch {
	case req.Logprobs || req.TopLogprobs != nil && *req.TopLogprobs > 0:
		return &FieldError{Field: req.field("logprobs"), Reason: "evalflow does not carry log probabilities to Gemini"}
	case len(req.Metadata) > 0 && string(req.Metadata) != "{}":
		return &FieldError{Field: req.field("metadata"), Reason: "Gemini's generateContent has no metadata"}
	case req.ServiceTier != "" && req.ServiceTier != "auto" && req.ServiceTier != "default":
		return &FieldError{Field: req.field("service_tier"),
			Reason: fmt.Sprintf("%q has no Gemini service tier (Gemini takes none)", req.ServiceTier)}
	case req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(req.Tools) > 0:
		return &FieldError{Field: req.field("parallel_tool_calls"),
			Reason: "Gemini cannot be told to make one function call at a time (remove it, or allow parallel calls)"}
	case req.Format != nil && req.Format.Type == FormatJSONSchema && len(req.Format.Schema) == 0:
		return &FieldError{Field: req.field("response_format"), Reason: "a json_schema format without a schema"}
	}
	return nil
}

// geminiParts writes content parts: text, and images as inline data (a
// data: URL) or file data (another URL).
func geminiParts(parts []Part) []geminiPart {
	var out []geminiPart
	for _, p := range parts {
		switch p.Type {
		case PartText:
			text := p.Text
			out = append(out, geminiPart{Text: &text})
		case PartImage:
			if mt, data, ok := dataURL(p.ImageURL); ok {
				out = append(out, geminiPart{InlineData: &geminiBlob{MimeType: mt, Data: data}})
			} else {
				out = append(out, geminiPart{FileData: &geminiFile{MimeType: imageMimeOf(p.ImageURL), FileURI: p.ImageURL}})
			}
		}
	}
	return out
}

// imageMimeOf guesses an image URL's type from its extension; Gemini
// requires one with file data.
func imageMimeOf(url string) string {
	ext := strings.ToLower(url[strings.LastIndexByte(url, '.')+1:])
	switch ext {
	case "jpg", "jpeg":
		return "image/jpeg"
	case "webp", "gif", "heic", "heif":
		return "image/" + ext
	}
	return "image/png"
}

// geminiFunctionResponsePart is a tool message as a functionResponse part:
// its text as {"output": text}, the Gemini SDKs' own wrapping, or the
// object it is.
func geminiFunctionResponsePart(m Message, names map[string]string) geminiPart {
	text := textOf(m.Content)
	resp := json.RawMessage(mustJSON(map[string]string{"output": text}))
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
		resp = json.RawMessage(text)
	}
	fr := &geminiFunctionResponse{Name: cmp.Or(names[m.ToolCallID], m.Name), Response: resp}
	if !strings.HasPrefix(m.ToolCallID, geminiCallPrefix) {
		fr.ID = m.ToolCallID
	}
	if fr.Name == "" {
		fr.Name = strings.TrimPrefix(m.ToolCallID, geminiCallPrefix)
	}
	return geminiPart{FunctionResponse: fr}
}

// mustJSON is v's JSON, for values that cannot fail to encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// geminiModelParts writes a model turn: thought parts, text, function
// calls, each thought signature back on the part that bore it. An
// upstream (forCaller false) gets back only Gemini's own signatures; a
// caller gets the other dialects' state in thought parts' signatures
// (carry.go).
func geminiModelParts(m Message, forCaller bool) []geminiPart {
	var thoughts, texts, calls []geminiPart
	onText, onCall := map[int]string{}, map[string]string{}
	for _, t := range geminiThinking(m, forCaller) {
		switch on := t.ThoughtOn; {
		case strings.HasPrefix(on, "text:"):
			n, _ := strconv.Atoi(on[len("text:"):])
			onText[n] = t.ThoughtSignature
		case strings.HasPrefix(on, "call:"):
			onCall[on[len("call:"):]] = t.ThoughtSignature
		case on != "":
			onCall[on] = t.ThoughtSignature // a chat provider's: the call's id
		default:
			text := t.Text
			thoughts = append(thoughts, geminiPart{Text: &text, Thought: true, ThoughtSignature: t.ThoughtSignature})
		}
	}
	for i, p := range geminiParts(m.Content) {
		p.ThoughtSignature = onText[i]
		delete(onText, i)
		texts = append(texts, p)
	}
	if m.Refusal != "" && textOf(m.Content) == "" {
		r := m.Refusal
		texts = append(texts, geminiPart{Text: &r})
	}
	for _, sig := range sortedValues(onText) { // a signature on an empty last part
		empty := ""
		texts = append(texts, geminiPart{Text: &empty, ThoughtSignature: sig})
	}
	for _, tc := range m.ToolCalls {
		fc := &geminiFunctionCall{Name: tc.Name, Args: rawArgs(tc.Arguments)}
		if !strings.HasPrefix(tc.ID, geminiCallPrefix) {
			fc.ID = tc.ID
		}
		calls = append(calls, geminiPart{FunctionCall: fc, ThoughtSignature: onCall[tc.ID]})
	}
	return slices.Concat(thoughts, texts, calls)
}

// sortedValues is m's values in the order of their keys.
func sortedValues(m map[int]string) []string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// geminiThinking is m's reasoning as Gemini takes it: for an upstream,
// thought parts of its own; for a caller every block, another dialect's
// state wrapped in the thought signature.
func geminiThinking(m Message, forCaller bool) []Thinking {
	if forCaller && len(m.ReasoningDetails) > 0 {
		return []Thinking{{Text: reasoningText(m), ThoughtSignature: wrap(carryChat, m.ReasoningDetails)}}
	}
	var out []Thinking
	for _, t := range thinkingOf(m) {
		switch {
		case t.geminiState():
		case !forCaller && (t.anthropicState() || t.responsesState()):
			continue // Gemini reads only its own signatures
		case t.anthropicState():
			b, _ := anthropicThinkingBlock(t, false)
			t = Thinking{Text: t.Text, ThoughtSignature: wrapJSON(carryAnthropic, []anthropicBlock{b})}
		case t.responsesState():
			t = Thinking{Text: t.Text, ThoughtSignature: wrapJSON(carryResponses, carried{ID: t.ID, Encrypted: t.Encrypted})}
		}
		out = append(out, t)
	}
	return out
}

// EncodeResponse writes a GenerateContentResponse: one candidate.
func (geminiDialect) EncodeResponse(resp Response) ([]byte, error) {
	b, err := jsonv1.Marshal(geminiResponseOut(resp, geminiModelParts(resp.Message, true), true))
	if err != nil {
		return nil, fmt.Errorf("encode gemini response: %w", err)
	}
	return b, nil
}
