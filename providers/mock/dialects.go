package mock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/evalflow/evalflow/dialects"
)

// serveDialect answers a Responses or Anthropic Messages call: the request
// is read into the typed vocabulary, answered like a chat call, and written
// back in d, streamed when asked. Anthropic calls without max_tokens are
// refused, as Anthropic does.
func (m *Model) serveDialect(w http.ResponseWriter, r *http.Request, d dialects.Dialect) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
	if err != nil {
		d.WriteError(w, http.StatusBadRequest, "", fmt.Sprintf("invalid request body: %v", err))
		return
	}
	req, err := d.ParseRequest(body)
	if err != nil {
		d.WriteError(w, http.StatusBadRequest, "", fmt.Sprintf("invalid request body: %v", err))
		return
	}
	if d == dialects.Anthropic && req.Sampling.MaxTokens == nil {
		d.WriteError(w, http.StatusBadRequest, "", "max_tokens: Field required")
		return
	}
	cr := chatRequestOf(req)
	if len(cr.Messages) == 0 {
		d.WriteError(w, http.StatusBadRequest, "", "messages must not be empty")
		return
	}
	if !m.wait(r) {
		return
	}
	rep := m.reply(cr)
	if rep.status != 0 && rep.status != http.StatusOK {
		d.WriteError(w, rep.status, "", rep.errMessage)
		return
	}
	h := conversationHash(cr.Messages)
	resp := dialects.Response{
		ID:           fmt.Sprintf("%s_mock_%016x", map[bool]string{true: "msg", false: "resp"}[d == dialects.Anthropic], h),
		Model:        m.cfg.Model,
		FinishReason: rep.finishReason(),
		Message:      dialects.Message{Role: dialects.RoleAssistant},
	}
	if rep.content != "" {
		resp.Message.Content = []dialects.Part{{Type: dialects.PartText, Text: rep.content}}
	}
	for _, tc := range rep.toolCalls {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, dialects.ToolCall{ID: tc.id, Name: tc.name, Arguments: tc.arguments})
	}
	if req.Reasoning != nil {
		resp.Message.Reasoning = rep.reasoning()
		t := dialects.Thinking{Text: resp.Message.Reasoning}
		if d == dialects.Anthropic {
			t.Signature = fmt.Sprintf("mock-signature-%016x", h)
		} else {
			t.ID = fmt.Sprintf("rs_mock_%016x", h)
			t.Encrypted = fmt.Sprintf("mock-encrypted-%016x", h)
		}
		resp.Message.Thinking = []dialects.Thinking{t}
	}
	u := rep.usage(cr)
	resp.Usage = dialects.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_ = d.WriteStream(w, resp) // the client went away; nothing to do
		return
	}
	out, err := d.EncodeResponse(resp)
	if err != nil {
		d.WriteError(w, http.StatusInternalServerError, "", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// serveCountTokens answers Anthropic's count_tokens with the mock's own
// estimate.
func (m *Model) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
	if err != nil {
		dialects.Anthropic.WriteError(w, http.StatusBadRequest, "", err.Error())
		return
	}
	req, err := dialects.Anthropic.ParseRequest(body)
	if err != nil {
		dialects.Anthropic.WriteError(w, http.StatusBadRequest, "", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": dialects.EstimateTokens(req)})
}

// wait sleeps the configured latency; false means the client went away.
func (m *Model) wait(r *http.Request) bool {
	if m.cfg.Latency <= 0 {
		return true
	}
	t := time.NewTimer(m.cfg.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// reasoning is the mock's visible reasoning for a reply.
func (r reply) reasoning() string {
	if len(r.toolCalls) > 0 {
		return "I should use the " + r.toolCalls[0].name + " tool."
	}
	return "I know the answer."
}

// chatRequestOf turns a typed request into the chat request the mock's
// reply logic reads.
func chatRequestOf(req dialects.Request) chatRequest {
	cr := chatRequest{Model: req.Model, Stream: req.Stream}
	for _, msg := range req.Messages {
		content, _ := json.Marshal(msg.Text())
		cm := chatMessage{Role: msg.Role, Content: content, ToolCallID: msg.ToolCallID}
		for _, tc := range msg.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function",
				Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
		}
		cr.Messages = append(cr.Messages, cm)
	}
	for _, t := range req.Tools {
		cr.Tools = append(cr.Tools, chatTool{Type: "function", Name: t.Name})
	}
	return cr
}
