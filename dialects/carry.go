package dialects

// Carrying state across dialects. A reasoning model wants its earlier
// reasoning back, as it issued it: Anthropic checks a thinking block's
// signature, the Responses API decrypts a reasoning item's
// encrypted_content, OpenRouter-style chat providers read
// reasoning_details. When the caller speaks another dialect than the
// upstream, that state travels through the caller's own opaque field and
// comes back with the caller's next turn:
//
//	upstream state            Responses caller            Anthropic caller            chat caller
//	Anthropic thinking,       reasoning item, encrypted_   (relayed)                   reasoning_details:
//	redacted_thinking         content = carryAnthropic                                 reasoning.text (signature),
//	                          + base64(blocks)                                         reasoning.encrypted
//	Responses reasoning item  (relayed)                   thinking block, signature    reasoning_details:
//	(id, encrypted_content)                               = carryResponses             reasoning.summary,
//	                                                      + base64({id, encrypted})    reasoning.encrypted
//	chat reasoning_details    reasoning item, encrypted_  thinking block, signature    (relayed)
//	                          content = carryChat         = carryChat + base64(
//	                          + base64(details)           details)
//	Gemini thoughtSignature   reasoning item, encrypted_  thinking block, signature    reasoning_details:
//	(and the part it was on)  content = carryGemini       = carryGemini + base64(      reasoning.encrypted,
//	                          + base64({sig, on})         {sig, on})                   format google-gemini-v1
//
// A Gemini caller gets the other dialects' state in a thought part's
// thoughtSignature, under the same prefixes.
//
// The prefixes are versioned so that a later encoding can still read what
// an older one handed out. The mapping of parallel tool calls and of
// Responses' store and include is here too; reasoning settings are in
// reasoning.go, the other settings in settings.go.

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// Prefixes of the reasoning state carried in another dialect's field.
const (
	carryAnthropic = "evalflow.anthropic.v1:"
	carryResponses = "evalflow.responses.v1:"
	carryChat      = "evalflow.chat.v1:"
	carryGemini    = "evalflow.gemini.v1:"
	carryFamily    = "evalflow."
)

// The formats of OpenRouter's reasoning_details evalflow reads and writes.
const (
	detailsAnthropic = "anthropic-claude-v1"
	detailsResponses = "openai-responses-v1"
	detailsGemini    = "google-gemini-v1"
)

// IncludeEncryptedReasoning is the Responses include value that returns
// reasoning items' encrypted_content.
const IncludeEncryptedReasoning = "reasoning.encrypted_content"

// anthropicState reports whether t holds an Anthropic block's state.
func (t Thinking) anthropicState() bool { return t.Signature != "" || t.Redacted != "" }

// responsesState reports whether t holds a Responses reasoning item's state.
func (t Thinking) responsesState() bool { return t.ID != "" || t.Encrypted != "" }

// geminiState reports whether t holds a Gemini thought signature.
func (t Thinking) geminiState() bool { return t.ThoughtSignature != "" }

// geminiCarried is a Gemini thought signature and the part it was on,
// inside another dialect's field.
type geminiCarried struct {
	Signature string `json:"sig"`
	On        string `json:"on,omitempty"`
}

// carried is the state of a Responses reasoning item inside a thinking
// block's signature.
type carried struct {
	ID        string `json:"id,omitempty"`
	Encrypted string `json:"encrypted_content,omitempty"`
}

// wrap is data under prefix, in base64.
func wrap(prefix string, data []byte) string {
	return prefix + base64.StdEncoding.EncodeToString(data)
}

// wrapJSON is v's JSON under prefix.
func wrapJSON(prefix string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings: cannot fail
	}
	return wrap(prefix, b)
}

// unwrap reads state evalflow wrapped: ok is false for anything else (a
// provider's own signature or encrypted_content).
func unwrap(s string) (prefix string, data []byte, ok bool, err error) {
	if !strings.HasPrefix(s, carryFamily) {
		return "", nil, false, nil
	}
	for _, p := range []string{carryAnthropic, carryResponses, carryChat, carryGemini} {
		if rest, found := strings.CutPrefix(s, p); found {
			data, err := base64.StdEncoding.DecodeString(rest)
			if err != nil {
				return p, nil, true, fmt.Errorf("reasoning state %s...: not base64: %w", strings.TrimSuffix(p, ":"), err)
			}
			return p, data, true, nil
		}
	}
	head, _, _ := strings.Cut(s, ":")
	return "", nil, true, fmt.Errorf("reasoning state of unknown version %q (this server reads %s, %s, %s and %s)",
		head, strings.TrimSuffix(carryAnthropic, ":"), strings.TrimSuffix(carryResponses, ":"),
		strings.TrimSuffix(carryChat, ":"), strings.TrimSuffix(carryGemini, ":"))
}

// unwrapCarried turns the state evalflow handed a caller in its own
// dialect's opaque field (a thinking block's signature, a reasoning item's
// encrypted_content, a Gemini thoughtSignature) back into the upstream's
// form. Text stays as it is.
func unwrapCarried(m *Message) error {
	var out []Thinking
	for i, t := range m.Thinking {
		s := cmp.Or(t.Signature, t.Encrypted, t.ThoughtSignature)
		prefix, data, ok, err := unwrap(s)
		if err != nil {
			return fmt.Errorf("reasoning %d: %w", i, err)
		}
		if !ok {
			if strings.HasPrefix(t.ID, evalflowItem) && t.Encrypted == "" {
				t.ID = "" // an item evalflow named for reasoning that had no state
			}
			out = append(out, t)
			continue
		}
		switch prefix {
		case carryResponses:
			var c carried
			if err := json.Unmarshal(data, &c); err != nil {
				return fmt.Errorf("reasoning %d: %s state: %w", i, carryResponses, err)
			}
			out = append(out, Thinking{Text: t.Text, ID: c.ID, Encrypted: c.Encrypted})
		case carryAnthropic:
			ts, err := thinkingOfAnthropicBlocks(data)
			if err != nil {
				return fmt.Errorf("reasoning %d: %s state: %w", i, carryAnthropic, err)
			}
			out = append(out, ts...)
		case carryChat:
			if !json.Valid(data) || !bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
				return fmt.Errorf("reasoning %d: %s state: not a JSON array", i, carryChat)
			}
			m.ReasoningDetails = data
			out = append(out, Thinking{Text: t.Text})
		case carryGemini:
			var c geminiCarried
			if err := json.Unmarshal(data, &c); err != nil || c.Signature == "" {
				return fmt.Errorf("reasoning %d: %s state: not a thought signature", i, carryGemini)
			}
			out = append(out, Thinking{Text: t.Text, ThoughtSignature: c.Signature, ThoughtOn: c.On})
		}
	}
	m.Thinking = out
	return nil
}

// thinkingOfAnthropicBlocks reads Anthropic thinking and redacted_thinking
// blocks.
func thinkingOfAnthropicBlocks(data []byte) ([]Thinking, error) {
	var bs []anthropicBlock
	if err := json.Unmarshal(data, &bs); err != nil {
		return nil, err
	}
	var out []Thinking
	for _, b := range bs {
		switch {
		case b.Type == "thinking" && b.Signature != nil:
			t := Thinking{Signature: *b.Signature}
			if b.Thinking != nil {
				t.Text = *b.Thinking
			}
			out = append(out, t)
		case b.Type == "redacted_thinking":
			out = append(out, Thinking{Redacted: b.Data})
		default:
			return nil, fmt.Errorf("block of type %q", b.Type)
		}
	}
	return out, nil
}

// anthropicThinkingBlocks is m's reasoning as Anthropic blocks. An upstream
// (forCaller false) gets back only Anthropic's own blocks: it rejects
// others. A caller gets every kind of state, the others' wrapped in the
// signature, and reasoning without state as an unsigned block it shows.
func anthropicThinkingBlocks(m Message, forCaller bool) []anthropicBlock {
	if forCaller && len(m.ReasoningDetails) > 0 {
		text, sig := reasoningText(m), wrap(carryChat, m.ReasoningDetails)
		return []anthropicBlock{{Type: "thinking", Thinking: &text, Signature: &sig}}
	}
	var out []anthropicBlock
	for _, t := range thinkingOf(m) {
		if b, ok := anthropicThinkingBlock(t, forCaller); ok {
			out = append(out, b)
		}
	}
	return out
}

// anthropicThinkingBlock is the block reasoning block t becomes, by the
// rules of anthropicThinkingBlocks; ok is false for a block an upstream
// would not take back. The streamed answer writes its blocks through it.
func anthropicThinkingBlock(t Thinking, forCaller bool) (anthropicBlock, bool) {
	text, sig := t.Text, t.Signature
	switch {
	case t.Redacted != "":
		return anthropicBlock{Type: "redacted_thinking", Data: t.Redacted}, true
	case t.Signature != "":
	case !forCaller:
		return anthropicBlock{}, false
	case t.responsesState():
		sig = wrapJSON(carryResponses, carried{ID: t.ID, Encrypted: t.Encrypted})
	case t.geminiState():
		sig = wrapJSON(carryGemini, geminiCarried{Signature: t.ThoughtSignature, On: t.ThoughtOn})
	}
	return anthropicBlock{Type: "thinking", Thinking: &text, Signature: &sig}, true
}

// anthropicThinkingReturned reports whether an Anthropic request with
// thinking on may carry the last assistant turn as written: when that turn
// called tools it must begin with its thinking block, signature intact.
func anthropicThinkingReturned(last []anthropicBlock) bool {
	hasToolUse := false
	for _, b := range last {
		hasToolUse = hasToolUse || b.Type == "tool_use"
	}
	return !hasToolUse || len(last) > 0 && (last[0].Type == "thinking" || last[0].Type == "redacted_thinking")
}

// reasoningText is m's reasoning text.
func reasoningText(m Message) string {
	if m.Reasoning != "" {
		return m.Reasoning
	}
	return joinReasoning(m.Thinking)
}

// responsesCallerReasoning is m's reasoning as Responses output items for a
// caller: a Responses upstream's items as they were, a run of Anthropic
// blocks as one item carrying them, a chat upstream's reasoning_details as
// one item carrying them, and reasoning without state as an item with only
// a summary.
func responsesCallerReasoning(m Message) []map[string]any {
	if len(m.ReasoningDetails) > 0 {
		enc := wrap(carryChat, m.ReasoningDetails)
		return []map[string]any{responsesReasoning(carriedID(enc), []string{reasoningText(m)}, enc)}
	}
	var out []map[string]any
	var blocks []anthropicBlock
	var texts []string
	flush := func() {
		if len(blocks) > 0 {
			enc := wrapJSON(carryAnthropic, blocks)
			out = append(out, responsesReasoning(carriedID(enc), texts, enc))
			blocks, texts = nil, nil
		}
	}
	for i, t := range thinkingOf(m) {
		if t.anthropicState() {
			if t.Redacted != "" {
				blocks = append(blocks, anthropicBlock{Type: "redacted_thinking", Data: t.Redacted})
				continue
			}
			text, sig := t.Text, t.Signature
			blocks = append(blocks, anthropicBlock{Type: "thinking", Thinking: &text, Signature: &sig})
			texts = append(texts, t.Text)
			continue
		}
		flush()
		out = append(out, responsesCallerItem(t, i))
	}
	flush()
	return out
}

// responsesCallerItem is reasoning block t as one output item for a
// caller, by the rules of responsesCallerReasoning, numbered n when it
// has no id of its own: the streamed answer writes its items through it,
// one an upstream block (an Anthropic block carried alone in its item).
func responsesCallerItem(t Thinking, n int) map[string]any {
	if t.geminiState() {
		enc := wrapJSON(carryGemini, geminiCarried{Signature: t.ThoughtSignature, On: t.ThoughtOn})
		return responsesReasoning(carriedID(enc), []string{t.Text}, enc)
	}
	if !t.anthropicState() {
		return responsesReasoning(orDefault(t.ID, fmt.Sprintf("%s%d", evalflowItem, n)), []string{t.Text}, t.Encrypted)
	}
	b, _ := anthropicThinkingBlock(t, false)
	enc := wrapJSON(carryAnthropic, []anthropicBlock{b})
	var texts []string
	if t.Redacted == "" {
		texts = []string{t.Text}
	}
	return responsesReasoning(carriedID(enc), texts, enc)
}

// detailsThinking is the one reasoning block that carries a chat
// upstream's reasoning_details to an Anthropic caller (forAnthropic: in
// its signature) or a Responses caller (in an item's encrypted_content),
// as the JSON encoders carry them; ok is false when m has none. A stream
// writer given such an answer writes this block instead of m's others.
func detailsThinking(m Message, forAnthropic bool) (Thinking, bool) {
	if len(m.ReasoningDetails) == 0 {
		return Thinking{}, false
	}
	enc := wrap(carryChat, m.ReasoningDetails)
	if forAnthropic {
		return Thinking{Text: reasoningText(m), Signature: enc}, true
	}
	return Thinking{Text: reasoningText(m), ID: carriedID(enc), Encrypted: enc}, true
}

// responsesUpstreamReasoning is m's reasoning as input items for a
// Responses upstream: only its own items, which have an id.
func responsesUpstreamReasoning(m Message) []map[string]any {
	var out []map[string]any
	for _, t := range m.Thinking {
		if t.ID != "" {
			out = append(out, responsesReasoning(t.ID, []string{t.Text}, t.Encrypted))
		}
	}
	return out
}

// responsesReasoning is a reasoning item.
func responsesReasoning(id string, texts []string, encrypted string) map[string]any {
	summary := []map[string]any{}
	for _, t := range texts {
		if t != "" {
			summary = append(summary, map[string]any{"type": "summary_text", "text": t})
		}
	}
	it := map[string]any{"type": "reasoning", "id": id, "summary": summary}
	if encrypted != "" {
		it["encrypted_content"] = encrypted
	}
	return it
}

// carriedID is the item id of carried state: the same state, the same id,
// so a caller that echoes an item sees it unchanged.
func carriedID(encrypted string) string {
	sum := sha256.Sum256([]byte(encrypted))
	return evalflowItem + hex.EncodeToString(sum[:12])
}

// evalflowItem begins the ids of the reasoning items evalflow makes.
const evalflowItem = "rs_evalflow_"

// reasoningDetail is one entry of OpenRouter's reasoning_details.
type reasoningDetail struct {
	Type      string  `json:"type"`
	ID        string  `json:"id,omitempty"`
	Format    string  `json:"format,omitempty"`
	Index     int     `json:"index"`
	Text      *string `json:"text,omitempty"`
	Summary   *string `json:"summary,omitempty"`
	Signature *string `json:"signature,omitempty"`
	Data      *string `json:"data,omitempty"`
}

// chatReasoningDetails is m's reasoning_details: a chat provider's as it
// sent them, or the other dialects' state in OpenRouter's format.
func chatReasoningDetails(m Message) json.RawMessage {
	if len(m.ReasoningDetails) > 0 {
		return m.ReasoningDetails
	}
	var ds []reasoningDetail
	for i, t := range m.Thinking {
		text, sig, enc, red := t.Text, t.Signature, t.Encrypted, t.Redacted
		switch {
		case t.Redacted != "":
			ds = append(ds, reasoningDetail{Type: "reasoning.encrypted", Format: detailsAnthropic, Index: i, Data: &red})
		case t.Signature != "":
			ds = append(ds, reasoningDetail{Type: "reasoning.text", Format: detailsAnthropic, Index: i, Text: &text, Signature: &sig})
		case t.geminiState():
			if t.Text != "" {
				ds = append(ds, reasoningDetail{Type: "reasoning.text", Format: detailsGemini, Index: i, Text: &text})
			}
			sig := t.ThoughtSignature
			ds = append(ds, reasoningDetail{Type: "reasoning.encrypted", ID: t.ThoughtOn, Format: detailsGemini, Index: i, Data: &sig})
		case t.responsesState():
			if t.Text != "" || t.Encrypted == "" {
				ds = append(ds, reasoningDetail{Type: "reasoning.summary", ID: t.ID, Format: detailsResponses, Index: i, Summary: &text})
			}
			if t.Encrypted != "" {
				ds = append(ds, reasoningDetail{Type: "reasoning.encrypted", ID: t.ID, Format: detailsResponses, Index: i, Data: &enc})
			}
		}
	}
	if len(ds) == 0 {
		return nil
	}
	b, err := json.Marshal(ds)
	if err != nil {
		panic(err) // plain structs of strings: cannot fail
	}
	return b
}

// thinkingOfDetails reads the state in reasoning_details that another
// dialect can take back: Anthropic blocks and Responses items. Entries of
// other formats stay in the raw reasoning_details only.
func thinkingOfDetails(raw json.RawMessage) []Thinking {
	var ds []reasoningDetail
	if jsonwire.Unmarshal(raw, &ds) != nil {
		return nil
	}
	var out []Thinking
	byID := map[string]int{}
	geminiText := map[int]int{} // a Gemini entry's index → its text's block
	item := func(id string) *Thinking {
		if n, ok := byID[id]; ok && id != "" {
			return &out[n]
		}
		byID[id] = len(out)
		out = append(out, Thinking{ID: id})
		return &out[len(out)-1]
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, d := range ds {
		switch {
		case d.Type == "reasoning.encrypted" && d.Format == detailsGemini:
			if n, ok := geminiText[d.Index]; ok && out[n].ThoughtSignature == "" {
				out[n].ThoughtSignature, out[n].ThoughtOn = str(d.Data), d.ID
				break
			}
			out = append(out, Thinking{ThoughtSignature: str(d.Data), ThoughtOn: d.ID})
		case d.Type == "reasoning.text" && d.Format == detailsGemini:
			geminiText[d.Index] = len(out)
			out = append(out, Thinking{Text: str(d.Text)})
		case d.Type == "reasoning.text" && d.Format == detailsAnthropic:
			out = append(out, Thinking{Text: str(d.Text), Signature: str(d.Signature)})
		case d.Type == "reasoning.text":
			// Another provider's signature would be refused by Anthropic.
			out = append(out, Thinking{Text: str(d.Text)})
		case d.Type == "reasoning.encrypted" && d.Format == detailsAnthropic:
			out = append(out, Thinking{Redacted: str(d.Data)})
		case d.Type == "reasoning.encrypted" && d.Format == detailsResponses:
			item(d.ID).Encrypted = str(d.Data)
		case d.Type == "reasoning.summary" && d.Format == detailsResponses:
			t := item(d.ID)
			t.Text += str(d.Summary)
		}
	}
	return out
}

// anthropicParallelOf reads disable_parallel_tool_use from Anthropic's
// tool_choice.
func anthropicParallelOf(raw json.RawMessage) *bool {
	var tc struct {
		Disable *bool `json:"disable_parallel_tool_use"`
	}
	if len(bytes.TrimSpace(raw)) == 0 || jsonwire.Unmarshal(raw, &tc) != nil || tc.Disable == nil {
		return nil
	}
	parallel := !*tc.Disable
	return &parallel
}

// anthropicToolChoiceOut is the tool_choice of an Anthropic request: the
// caller's choice, with disable_parallel_tool_use when the caller forbade
// parallel tool calls.
func anthropicToolChoiceOut(tc *ToolChoice, parallel *bool, hasTools bool) map[string]any {
	choice := anthropicToolChoice(tc)
	if choice == nil && (parallel == nil || *parallel || !hasTools) {
		return nil
	}
	out := map[string]any{"type": "auto"}
	for k, v := range choice {
		out[k] = v
	}
	if parallel != nil && !*parallel && hasTools && out["type"] != "none" {
		out["disable_parallel_tool_use"] = true
	}
	return out
}

// refuseStopResponses refuses stop sequences toward a Responses upstream.
func refuseStopResponses(req Request) error {
	if len(req.Stop) == 0 {
		return nil
	}
	return &FieldError{Field: req.field("stop"), Reason: "the Responses API has no stop field " +
		"(remove it, or use a chat or anthropic upstream)"}
}

// responsesStoreInclude is the store and include of a request to a
// Responses upstream: the caller's, or, when reasoning state must survive
// to the next turn, store false and the include that returns
// encrypted_content, since evalflow keeps no response for
// previous_response_id.
func responsesStoreInclude(req Request) (store *bool, include []string) {
	store, include = req.Store, req.Include
	needs := req.Reasoning != nil && req.Reasoning.Effort != "none"
	for _, m := range req.Messages {
		for _, t := range m.Thinking {
			needs = needs || t.responsesState()
		}
	}
	if !needs {
		return store, include
	}
	if store == nil {
		no := false
		store = &no
	}
	if include == nil && !*store {
		include = []string{IncludeEncryptedReasoning}
	}
	return store, include
}

// refusePreviousResponse refuses previous_response_id toward an upstream
// of another dialect: evalflow keeps no responses, so the conversation it
// names would silently be missing.
func refusePreviousResponse(req Request) error {
	if req.PreviousResponseID == "" {
		return nil
	}
	return &FieldError{Field: "previous_response_id", Reason: "only a Responses upstream keeps responses " +
		"(send the whole conversation in input, with store: false)"}
}
