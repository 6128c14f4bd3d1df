package dialects

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// geminiDialect is Google's Gemini API: generateContent and
// streamGenerateContent (alt=sse). The model is named by the route, not
// the body: ParseRequest leaves Request.Model empty, EncodeRequest writes
// no model (GeminiPath is the route), and Overlay sets only sampling.
type geminiDialect struct{}

func (geminiDialect) Name() string { return NameGemini }

// Path is the generateContent route below /v1beta, with {model} standing
// for the model's name.
func (geminiDialect) Path() string { return "/models/{model}:generateContent" }

// GeminiPath is the route below /v1beta of a call to model: its
// streamGenerateContent with alt=sse when stream is set.
func GeminiPath(model string, stream bool) string {
	if stream {
		return "/models/" + model + ":streamGenerateContent?alt=sse"
	}
	return "/models/" + model + ":generateContent"
}

// Secret is the x-goog-api-key header, or else a bearer token. (Google's
// ?key= query parameter is the route's to read.)
func (geminiDialect) Secret(h http.Header) string {
	if s := h.Get("X-Goog-Api-Key"); s != "" {
		return s
	}
	return bearer(h)
}

// ParseRequest reads a generateContent request. systemInstruction becomes
// a leading system message; a user turn's functionResponse parts become
// tool messages ahead of the rest of the turn, answering the model turn's
// call of that id, or else of that name; a model turn's thoughts and
// thought signatures become its Thinking (gemini_encode.go puts them back
// on their parts).
func (geminiDialect) ParseRequest(body []byte) (Request, error) {
	var gr geminiRequest
	if err := jsonwire.UnmarshalOwned(body, &gr); err != nil {
		return Request{}, fmt.Errorf("decode gemini request: %w", err)
	}
	req := Request{From: NameGemini}
	if gr.SystemInstruction != nil {
		m := Message{Role: RoleSystem}
		for _, p := range gr.SystemInstruction.Parts {
			if part, ok := p.part(); ok {
				m.Content = append(m.Content, part)
			}
		}
		req.Messages = append(req.Messages, m)
	}
	var calls []ToolCall // the last model turn's, for its responses
	for i, c := range gr.Contents {
		if c.Role == geminiRoleModel {
			m, err := geminiModelTurn(c.Parts, i)
			if err != nil {
				return Request{}, fmt.Errorf("decode gemini request: contents %d: %w", i, err)
			}
			calls = m.ToolCalls
			req.Messages = append(req.Messages, m)
			continue
		}
		req.Messages = append(req.Messages, geminiUserTurn(c.Parts, calls)...)
	}
	if err := gr.settings(&req); err != nil {
		return Request{}, fmt.Errorf("decode gemini request: %w", err)
	}
	return req, nil
}

// Overlay sets the sampling of s in body's generationConfig (temperature,
// topP, maxOutputTokens, seed), keeping every other byte. model is the
// route's, not the body's: it is not written.
func (geminiDialect) Overlay(body []byte, _ string, s Sampling) (Body, error) {
	out, err := geminiOverlay(body, s)
	if err != nil {
		return nil, fmt.Errorf("gemini request: %w", err)
	}
	return out, nil
}

// geminiRoleModel is Gemini's assistant role.
const geminiRoleModel = "model"

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	Tools             []geminiTool    `json:"tools"`
	ToolConfig        *struct {
		FunctionCallingConfig json.RawMessage `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *geminiGenerationConfig `json:"generationConfig"`
	SafetySettings   json.RawMessage         `json:"safetySettings"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is any part; only the fields of its kind are set.
type geminiPart struct {
	Text             *string                 `json:"text,omitempty"`
	Thought          bool                    `json:"thought,omitempty"`
	ThoughtSignature string                  `json:"thoughtSignature,omitempty"`
	InlineData       *geminiBlob             `json:"inlineData,omitempty"`
	FileData         *geminiFile             `json:"fileData,omitempty"`
	FunctionCall     *geminiFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiFunctionResponse `json:"functionResponse,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFile struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type geminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type geminiFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// geminiTool is a tool: function declarations, or one of Gemini's own
// tools, kept as sent.
type geminiTool struct {
	FunctionDeclarations  []geminiFunction `json:"functionDeclarations,omitempty"`
	GoogleSearch          json.RawMessage  `json:"googleSearch,omitempty"`
	GoogleSearchRetrieval json.RawMessage  `json:"googleSearchRetrieval,omitempty"`
	CodeExecution         json.RawMessage  `json:"codeExecution,omitempty"`
	URLContext            json.RawMessage  `json:"urlContext,omitempty"`
	Retrieval             json.RawMessage  `json:"retrieval,omitempty"`
	FileSearch            json.RawMessage  `json:"fileSearch,omitempty"`
	GoogleMaps            json.RawMessage  `json:"googleMaps,omitempty"`
	ComputerUse           json.RawMessage  `json:"computerUse,omitempty"`
}

type geminiFunction struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type geminiGenerationConfig struct {
	Temperature        *float64              `json:"temperature,omitempty"`
	TopP               *float64              `json:"topP,omitempty"`
	TopK               *float64              `json:"topK,omitempty"`
	MaxOutputTokens    *int                  `json:"maxOutputTokens,omitempty"`
	StopSequences      []string              `json:"stopSequences,omitempty"`
	CandidateCount     *int                  `json:"candidateCount,omitempty"`
	Seed               *int64                `json:"seed,omitempty"`
	ResponseMimeType   string                `json:"responseMimeType,omitempty"`
	ResponseSchema     json.RawMessage       `json:"responseSchema,omitempty"`
	ResponseJSONSchema json.RawMessage       `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *geminiThinkingConfig `json:"thinkingConfig,omitempty"`
}

type geminiThinkingConfig struct {
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// geminiRequestShape is what ParseRequest reads: Overlay checks a body
// against it.
var geminiRequestShape = jsonwire.Of(reflect.TypeFor[geminiRequest](),
	jsonwire.Hook(reflect.TypeFor[geminiRequest](), func(o jsonwire.Object) error {
		return o.Check("safetySettings", geminiSafetyShape)
	}))

// geminiSafetyShape is safetySettings: a list of objects, kept as sent.
var geminiSafetyShape = jsonwire.Of(reflect.TypeFor[[]map[string]json.RawMessage]())

// part is a user or system part as a Part: text, inline data and file
// data (as a data: or file URL).
func (p geminiPart) part() (Part, bool) {
	switch {
	case p.Text != nil && !p.Thought:
		return Part{Type: PartText, Text: *p.Text}, true
	case p.InlineData != nil:
		return Part{Type: PartImage, ImageURL: "data:" + p.InlineData.MimeType + ";base64," + p.InlineData.Data}, true
	case p.FileData != nil:
		return Part{Type: PartImage, ImageURL: p.FileData.FileURI}, true
	}
	return Part{}, false
}

// geminiCallPrefix begins the ids evalflow gives function calls that came
// without one; they are not sent back to Gemini.
const geminiCallPrefix = "call_gemini_"

// geminiCallID is a function call's id: its own, or one made of where it
// is (turn, part), the same each time the conversation is read.
func geminiCallID(fc *geminiFunctionCall, turn, part int) string {
	if fc.ID != "" {
		return fc.ID
	}
	return geminiCallPrefix + strconv.Itoa(turn) + "_" + strconv.Itoa(part)
}

// geminiModelTurn reads a model turn: thought parts and every part's
// thought signature as Thinking, text, and function calls.
func geminiModelTurn(parts []geminiPart, turn int) (Message, error) {
	m := Message{Role: RoleAssistant}
	for k, p := range parts {
		on := ""
		switch {
		case p.Thought:
			text := ""
			if p.Text != nil {
				text = *p.Text
			}
			m.Thinking = append(m.Thinking, Thinking{Text: text, ThoughtSignature: p.ThoughtSignature})
			continue
		case p.FunctionCall != nil:
			tc := ToolCall{ID: geminiCallID(p.FunctionCall, turn, k), Name: p.FunctionCall.Name, Arguments: geminiArgs(p.FunctionCall.Args)}
			m.ToolCalls = append(m.ToolCalls, tc)
			on = "call:" + tc.ID
		case p.Text != nil:
			on = "text:" + strconv.Itoa(len(m.Content))
			if *p.Text != "" || p.ThoughtSignature == "" {
				m.Content = append(m.Content, Part{Type: PartText, Text: *p.Text})
			}
		default:
			if part, ok := p.part(); ok {
				m.Content = append(m.Content, part)
			}
		}
		if p.ThoughtSignature != "" && on != "" {
			m.Thinking = append(m.Thinking, Thinking{ThoughtSignature: p.ThoughtSignature, ThoughtOn: on})
		}
	}
	m.Reasoning = joinReasoning(m.Thinking)
	if err := unwrapCarried(&m); err != nil {
		return Message{}, err
	}
	return m, nil
}

// geminiArgs is a function call's args as arguments text.
func geminiArgs(raw json.RawMessage) string {
	if raw = presentJSON(raw); raw == nil {
		return "{}"
	}
	return string(raw)
}

// geminiUserTurn reads a user turn: its functionResponse parts as tool
// messages answering calls (by id, else by name, else the name is the
// id), then its other parts.
func geminiUserTurn(parts []geminiPart, calls []ToolCall) []Message {
	var out []Message
	rest := Message{Role: RoleUser}
	used := map[string]bool{}
	responses := false
	for _, p := range parts {
		fr := p.FunctionResponse
		if fr == nil {
			if part, ok := p.part(); ok {
				rest.Content = append(rest.Content, part)
			}
			continue
		}
		responses = true
		id := geminiAnswered(fr, calls, used)
		out = append(out, Message{Role: RoleTool, ToolCallID: id, Name: fr.Name,
			Content: []Part{{Type: PartText, Text: geminiResponseText(fr.Response)}}})
	}
	if len(rest.Content) > 0 || !responses {
		out = append(out, rest)
	}
	return out
}

// geminiAnswered is the id of the call a functionResponse answers.
func geminiAnswered(fr *geminiFunctionResponse, calls []ToolCall, used map[string]bool) string {
	if fr.ID != "" {
		used[fr.ID] = true
		return fr.ID
	}
	for _, c := range calls {
		if c.Name == fr.Name && !used[c.ID] {
			used[c.ID] = true
			return c.ID
		}
	}
	return geminiCallPrefix + fr.Name
}

// geminiResponseText is a functionResponse's response as a tool result's
// text: {"output": text} or {"content": text} is the text (the SDKs' own
// wrapping), another object its JSON.
func geminiResponseText(raw json.RawMessage) string {
	raw = presentJSON(raw)
	var obj map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &obj) != nil {
		return string(raw)
	}
	if len(obj) == 1 {
		for _, k := range []string{"output", "content"} {
			var s string
			if v, ok := obj[k]; ok && json.Unmarshal(v, &s) == nil {
				return s
			}
		}
	}
	return string(raw)
}

// settings reads everything of the request but its contents into req.
func (gr geminiRequest) settings(req *Request) error {
	var g GeminiSettings
	for _, t := range gr.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := presentJSON(f.ParametersJSONSchema)
			if schema == nil {
				schema = openAPIToJSONSchema(presentJSON(f.Parameters))
			}
			req.Tools = append(req.Tools, Tool{Name: f.Name, Description: f.Description, Parameters: schema})
		}
	}
	g.Tools = geminiOtherTools(gr.Tools)
	if gr.ToolConfig != nil {
		tc, raw, err := geminiToolChoiceOf(gr.ToolConfig.FunctionCallingConfig)
		if err != nil {
			return err
		}
		req.ToolChoice, g.FunctionCalling = tc, raw
	}
	g.SafetySettings = presentJSON(gr.SafetySettings)
	if gc := gr.GenerationConfig; gc != nil {
		gc.read(req, &g)
	}
	if !reflect.ValueOf(g).IsZero() {
		req.Gemini = &g
	}
	return nil
}

// read reads generationConfig into req and g.
func (gc *geminiGenerationConfig) read(req *Request, g *GeminiSettings) {
	req.Sampling = Sampling{Temperature: gc.Temperature, TopP: gc.TopP, MaxTokens: gc.MaxOutputTokens, Seed: gc.Seed}
	req.Stop = gc.StopSequences
	g.TopK = gc.TopK
	if gc.CandidateCount != nil {
		req.N = *gc.CandidateCount
	}
	switch mime := gc.ResponseMimeType; {
	case presentJSON(gc.ResponseJSONSchema) != nil:
		req.Format = &Format{Type: FormatJSONSchema, Schema: presentJSON(gc.ResponseJSONSchema)}
	case presentJSON(gc.ResponseSchema) != nil:
		g.ResponseSchema = presentJSON(gc.ResponseSchema)
	case mime == geminiJSON:
		req.Format = &Format{Type: FormatJSONObject}
	case mime == geminiText:
		req.Format = &Format{Type: FormatText}
	case mime != "":
		g.ResponseMimeType = mime
	}
	if tc := gc.ThinkingConfig; tc != nil {
		req.Reasoning = geminiReasoningOf(tc)
	}
}

// The response MIME types that Format says.
const (
	geminiJSON = "application/json"
	geminiText = "text/plain"
)

// geminiReasoningOf reads thinkingConfig: a level is the effort, a budget
// of 0 is none, -1 (dynamic) adaptive, another the budget; includeThoughts
// asks for the thoughts' summaries.
func geminiReasoningOf(tc *geminiThinkingConfig) *ReasoningConfig {
	r := &ReasoningConfig{Effort: strings.ToLower(tc.ThinkingLevel)}
	if b := tc.ThinkingBudget; b != nil && r.Effort == "" {
		switch {
		case *b == 0:
			r.Effort = "none"
		case *b < 0:
			r.Adaptive = true
		default:
			r.BudgetTokens = *b
		}
	}
	if tc.IncludeThoughts {
		r.Summary = "auto"
	}
	return r
}

// geminiOtherTools are Gemini's own tools (all but function
// declarations), as sent.
func geminiOtherTools(tools []geminiTool) []json.RawMessage {
	var out []json.RawMessage
	for _, t := range tools {
		t.FunctionDeclarations = nil
		if reflect.ValueOf(t).IsZero() {
			continue
		}
		b, err := json.Marshal(t)
		if err == nil {
			out = append(out, b)
		}
	}
	return out
}

// geminiToolChoiceOf reads functionCallingConfig: AUTO, NONE, ANY (with
// one allowed function, that one). What a ToolChoice cannot say is
// returned raw.
func geminiToolChoiceOf(raw json.RawMessage) (*ToolChoice, json.RawMessage, error) {
	raw = presentJSON(raw)
	if raw == nil {
		return nil, nil, nil
	}
	var fc struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames"`
	}
	if err := jsonwire.Unmarshal(raw, &fc); err != nil {
		return nil, nil, fmt.Errorf("toolConfig.functionCallingConfig: %w", err)
	}
	switch strings.ToUpper(fc.Mode) {
	case "", "MODE_UNSPECIFIED", "AUTO":
		if len(fc.AllowedFunctionNames) == 0 {
			return &ToolChoice{Mode: ToolChoiceAuto}, nil, nil
		}
	case "NONE":
		return &ToolChoice{Mode: ToolChoiceNone}, nil, nil
	case "ANY":
		switch len(fc.AllowedFunctionNames) {
		case 0:
			return &ToolChoice{Mode: ToolChoiceRequired}, nil, nil
		case 1:
			return &ToolChoice{Mode: ToolChoiceRequired, Name: fc.AllowedFunctionNames[0]}, nil, nil
		}
	}
	return nil, raw, nil
}

// openAPIToJSONSchema is a Gemini parameters schema (OpenAPI's subset,
// types in upper case: "OBJECT") as a JSON schema: the type names in
// lower case. Other keywords are the same in both.
func openAPIToJSONSchema(raw json.RawMessage) json.RawMessage {
	if raw == nil || !bytes.Contains(raw, []byte(`"type"`)) {
		return raw
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	lowerTypes(v)
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// lowerTypes lowers the case of every "type" string in v.
func lowerTypes(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "type" {
				v[k] = strings.ToLower(s)
				continue
			}
			lowerTypes(e)
		}
	case []any:
		for _, e := range v {
			lowerTypes(e)
		}
	}
}
