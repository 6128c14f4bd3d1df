package interception

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/trace"
)

// Token-in (Rollout.TokenIn) sends a chat call's prompt to the upstream as
// token ids when it extends an earlier turn of the rollout, so that what
// the model saw of that turn is exactly what it sampled, not a
// re-tokenization of its text (prime-rl's "exact prefix" invariant).
//
// A call qualifies when the messages of an earlier answered turn followed
// by that turn's answer are the first messages of the call (compared by
// their role, text, tool calls and tool call id: what a chat template
// renders). The upstream's /tokenize (vLLM's) then tokenizes the call's
// messages with the generation prompt, and the earlier turn's messages with
// its answer without; when the first ids start with the second, the rest
// are the new messages' tokens, and the prompt is the earlier turn's prompt
// and completion ids followed by them. The call goes to
// /v1/chat/completions/tokens (prime-rl's vLLM route) with the prompt in
// "tokens", and its turn records TokenIn. Otherwise it goes as text.

// tokenizePath is vLLM's tokenize route, at its server's root.
const tokenizePath = "/tokenize"

// chatTokensPath is prime-rl's chat completions route that takes the
// prompt as token ids, below /v1.
const chatTokensPath = "/chat/completions/tokens"

// rootUpstream is an Upstream that can call a route at its server's root,
// outside /v1 (providers.Client can). Another Upstream is asked below /v1.
type rootUpstream interface {
	RelayRoot(ctx context.Context, path string, h http.Header, body dialects.Body, once bool) (*http.Response, int, error)
}

// maxSampled bounds the answered turns a token-in rollout keeps for its
// later calls to extend: each holds its whole conversation's ids. A harness
// extends its latest turn, or one shortly before it when it branches.
const maxSampled = 16

// sampled is an answered turn of a token-in rollout: the conversation it
// ended, its request's messages then its answer (messageKey each), and the
// ids the model saw and produced, prompt then completion.
type sampled struct {
	index int
	keys  []string
	ids   []int32
	// truncated: the turn was cut at max_tokens, its completion has no
	// end token.
	truncated bool
}

// messageKey is the part of a message a chat template renders, as JSON:
// two messages with the same key are the same to the model.
func messageKey(m dialects.Message) string {
	k := struct {
		Role       string              `json:"role"`
		Text       string              `json:"text,omitempty"`
		Images     []string            `json:"images,omitempty"`
		ToolCalls  []dialects.ToolCall `json:"tool_calls,omitempty"`
		ToolCallID string              `json:"tool_call_id,omitempty"`
		Name       string              `json:"name,omitempty"`
	}{Role: m.Role, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
	var text strings.Builder
	for _, p := range m.Content {
		switch p.Type {
		case dialects.PartText:
			text.WriteString(p.Text)
		default:
			k.Images = append(k.Images, p.ImageURL)
		}
	}
	k.Text = text.String()
	b, _ := json.Marshal(k) // strings and slices of them always encode
	return string(b)
}

func messageKeys(msgs []dialects.Message) []string {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = messageKey(m)
	}
	return keys
}

// remember keeps t, a turn of a token-in call whose request messages had
// keys, as a turn later calls may extend: when it was answered and holds
// its prompt and completion ids.
func (e *entry) remember(t trace.Turn, index int, keys []string) {
	if keys == nil || t.Status != http.StatusOK || t.Error != "" || t.Tokens == nil ||
		len(t.Tokens.PromptIDs) == 0 || len(t.Tokens.CompletionIDs) == 0 {
		return
	}
	answer := t.Response.Message
	answer.Role = dialects.RoleAssistant
	s := sampled{index: index, keys: append(slices.Clip(keys), messageKey(answer)),
		ids:       append(slices.Clone(t.Tokens.PromptIDs), t.Tokens.CompletionIDs...),
		truncated: t.Response.FinishReason == dialects.FinishLength}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.sampled) == maxSampled {
		e.sampled = slices.Delete(e.sampled, 0, 1)
	}
	e.sampled = append(e.sampled, s)
}

// extended is the latest answered turn whose conversation the call of
// message keys keys extends by at least one message.
func (e *entry) extended(keys []string) (sampled, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var best sampled
	found := false
	for _, s := range e.sampled {
		if len(s.keys) < len(keys) && slices.Equal(s.keys, keys[:len(s.keys)]) && (!found || s.index > best.index) {
			best, found = s, true
		}
	}
	return best, found
}

// noteText reports whether the rollout's first call that goes as text for
// a reason worth telling is this one.
func (e *entry) noteText() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := !e.textNoted
	e.textNoted = true
	return first
}

// tokenIn decides how a call of a token-in rollout goes, its chat body
// (as it would go as text) and typed request at hand. It returns the
// prompt as ids when the call goes in as tokens. failed says the call is
// answered already: the upstream failed a tokenize call for good, which is
// the upstream's failure, as a failed model call is.
func (s *Server) tokenIn(c *recorder, body []byte) (prompt []int32, failed bool) {
	req, err := dialects.Chat.ParseRequest(body)
	if err != nil {
		return nil, false // the turn records why the body does not parse
	}
	c.tokenKeys = messageKeys(req.Messages)
	// Calls whose caller has its answer record their turns first: the
	// harness's next call may arrive before its previous turn is recorded.
	c.e.settle(settleTimeout)
	prev, ok := c.e.extended(c.tokenKeys)
	if !ok {
		if c.e.hasSampled() {
			s.textBecause(c, "no earlier turn's messages and answer begin the call's messages")
		}
		return nil, false
	}
	var wire struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(body, &wire); err != nil || len(wire.Messages) != len(req.Messages) {
		s.textBecause(c, "the call's messages could not be read for /tokenize")
		return nil, false
	}
	model := c.e.rollout.Model
	if model == "" {
		model = req.Model
	}
	full, why, failed := s.tokenize(c, model, wire.Messages, wire.Tools, true)
	if failed {
		return nil, true
	}
	if why != "" {
		s.textBecause(c, why)
		return nil, false
	}
	head, why, failed := s.tokenize(c, model, wire.Messages[:len(prev.keys)], wire.Tools, false)
	if failed {
		return nil, true
	}
	if why != "" {
		s.textBecause(c, why)
		return nil, false
	}
	return s.bridge(c, model, prev, head, full), false
}

// bridge is the prompt of a call that extends prev, head and full the
// template's ids of prev's conversation (without the generation prompt)
// and of the call's (with it); nil when the call goes as text, said why.
// A model of a family chattemplate knows is bridged by its family's end
// token, whatever its template makes of the history. Another is bridged
// only where its template's render of the call begins with its render of
// the earlier turn, and the earlier turn ended by itself.
func (s *Server) bridge(c *recorder, model string, prev sampled, head, full []int32) []int32 {
	if fam, err := chattemplate.ForModel(model); err == nil {
		prompt, closed, why := fam.Bridge(prev.ids, head, full)
		if why != "" {
			s.textBecause(c, why)
			return nil
		}
		c.turn.TokenInBridge, c.turn.TokenInClosed = fam.Name, closed
		return prompt
	}
	if len(full) <= len(head) || !slices.Equal(full[:len(head)], head) {
		s.textBecause(c, fmt.Sprintf("the chat template's tokens of the call do not start with those of the earlier turn's conversation, and no family's bridge is known for model %q (bridged: %s)",
			model, strings.Join(chattemplate.Names(), ", ")))
		return nil
	}
	if prev.truncated {
		s.textBecause(c, fmt.Sprintf("the earlier turn was cut at max_tokens, and no family's end token is known to close it for model %q (bridged: %s)",
			model, strings.Join(chattemplate.Names(), ", ")))
		return nil
	}
	c.turn.TokenInBridge = "prefix"
	return append(slices.Clone(prev.ids), full[len(head):]...)
}

// hasSampled reports whether the rollout has an answered turn a call could
// extend.
func (e *entry) hasSampled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sampled) > 0
}

// textBecause records on the turn, and logs once per rollout, why a
// token-in call goes as text.
func (s *Server) textBecause(c *recorder, why string) {
	c.turn.TokenInText = why
	if c.e.noteText() {
		s.cfg.Logger.Debug("token-in: call sent as text", "rollout", c.e.rollout.Key, "turn", c.index, "why", why)
	}
}

// tokenize asks the upstream's /tokenize for the ids of messages as the
// model's chat template renders them, with the generation prompt when gen.
// why, when not empty, says why the call goes as text instead (the route
// is not served, or refused the messages); failed says the upstream failed
// and the caller is answered.
func (s *Server) tokenize(c *recorder, model string, messages []json.RawMessage, tools json.RawMessage, gen bool) (ids []int32, why string, failed bool) {
	req := map[string]any{"model": model, "messages": messages, "add_generation_prompt": gen}
	if len(tools) > 0 && string(tools) != "null" {
		req["tools"] = tools
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, "tokenize request: " + err.Error(), false
	}
	var resp *http.Response
	var attempts int
	ctx, once := c.r.Context(), c.turn.CallerRetry
	switch up := s.cfg.Upstream.(type) {
	case rootUpstream:
		resp, attempts, err = up.RelayRoot(ctx, tokenizePath, nil, dialects.Body{body}, once)
	case onceUpstream:
		if once {
			resp, attempts, err = up.RelayOnce(ctx, tokenizePath, nil, dialects.Body{body})
			break
		}
		resp, attempts, err = s.cfg.Upstream.Relay(ctx, tokenizePath, nil, dialects.Body{body})
	default:
		resp, attempts, err = s.cfg.Upstream.Relay(ctx, tokenizePath, nil, dialects.Body{body})
	}
	if err != nil {
		c.turn.Attempts = attempts
		if c.clientGone() {
			return nil, "", true
		}
		c.sent = true // the provider failed the call: it keeps its turn
		s.cfg.Logger.Warn("upstream tokenize call failed", "rollout", c.e.rollout.Key, "err", err)
		c.upstreamFailed(failureOf(err), "upstream: tokenize: "+err.Error())
		return nil, "", true
	}
	defer resp.Body.Close()
	if f := statusFailure(resp.StatusCode); f != "" {
		c.turn.Attempts = attempts
		c.sent = true
		c.upstreamFailed(f, fmt.Sprintf("upstream: tokenize: status %d", resp.StatusCode))
		return nil, "", true
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("the upstream's %s answered %d", tokenizePath, resp.StatusCode), false
	}
	var answer struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes)).Decode(&answer); err != nil {
		return nil, fmt.Sprintf("the upstream's %s answer could not be read: %v", tokenizePath, err), false
	}
	return answer.Tokens, "", false
}

// withTokenIn sends out, the chat body of a call about to go as text to
// path, in as tokens when the rollout asks for token-in and the call
// qualifies: it returns the body and route path to send. failed says the
// call is answered already.
func (s *Server) withTokenIn(c *recorder, out dialects.Body, path string) (dialects.Body, string, bool) {
	if !c.e.rollout.TokenIn || s.up.Name() != dialects.NameChat {
		return out, path, false
	}
	body := out.Bytes()
	prompt, failed := s.tokenIn(c, body)
	if failed || prompt == nil {
		return out, path, failed
	}
	withPrompt, err := dialects.OverlayChatPrompt(body, prompt)
	if err != nil {
		s.textBecause(c, "the prompt could not be set on the body: "+err.Error())
		return out, path, false
	}
	c.turn.TokenIn = true
	return withPrompt, chatTokensPath, false
}
