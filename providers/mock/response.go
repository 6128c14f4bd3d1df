package mock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// writeCompletion answers with one chat.completion JSON object.
func (m *Model) writeCompletion(w http.ResponseWriter, req chatRequest, rep reply) {
	msg := &fullMessage{Role: "assistant"}
	if len(rep.toolCalls) == 0 || rep.content != "" {
		msg.Content = &rep.content
	}
	for _, tc := range rep.toolCalls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{
			ID: tc.id, Type: "function", Function: wireFunction{Name: tc.name, Arguments: tc.arguments},
		})
	}
	if req.ReasoningEffort != "" {
		r := rep.reasoning()
		msg.ReasoningContent = &r
	}
	finish := rep.finishReason()
	u := rep.usage(req)
	c := completion{
		ID:      completionID(req),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   m.cfg.Model,
		Choices: []choice{{Message: msg, FinishReason: &finish}},
		Usage:   &u,
	}
	c.Choices[0].TokenIDs, c.Choices[0].Logprobs = tokenData(req, completionText(rep), 0)
	if req.ReturnTokenIDs {
		c.PromptTokenIDs = m.promptTokenIDs(req)
	}
	writeJSON(w, http.StatusOK, c)
}

// writeStream answers as server-sent chat.completion.chunk events, the way
// OpenAI does: a role chunk, content in several pieces, each tool call's
// arguments in several pieces, a chunk carrying finish_reason, a usage chunk
// with no choices when stream_options.include_usage is set, then [DONE].
func (m *Model) writeStream(w http.ResponseWriter, req chatRequest, rep reply) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)

	base := completion{
		ID:      completionID(req),
		Object:  "chat.completion.chunk",
		Created: time.Now().Unix(),
		Model:   m.cfg.Model,
	}
	send := func(c completion) bool {
		b, err := json.Marshal(c)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	chunk := func(d delta, finish *string) completion {
		c := base
		c.Choices = []choice{{Delta: &d, FinishReason: finish}}
		return c
	}
	// at numbers the completion's tokens across chunks.
	at := 0
	withTokens := func(c completion, text string) completion {
		c.Choices[0].TokenIDs, c.Choices[0].Logprobs = tokenData(req, text, at)
		at += utf8.RuneCountInString(text)
		return c
	}

	first := delta{Role: "assistant"}
	if len(rep.toolCalls) == 0 {
		empty := ""
		first.Content = &empty
	}
	head := chunk(first, nil)
	if req.ReturnTokenIDs {
		head.PromptTokenIDs = m.promptTokenIDs(req)
	}
	if !send(head) {
		return
	}
	if req.ReasoningEffort != "" {
		for _, piece := range split(rep.reasoning(), 3) {
			if !send(chunk(delta{ReasoningContent: &piece}, nil)) {
				return
			}
		}
	}
	for _, piece := range split(rep.content, 4) {
		if !send(withTokens(chunk(delta{Content: &piece}, nil), piece)) {
			return
		}
	}
	for k, tc := range rep.toolCalls {
		head := wireToolCall{Index: &k, ID: tc.id, Type: "function", Function: wireFunction{Name: tc.name}}
		if !send(withTokens(chunk(delta{ToolCalls: []wireToolCall{head}}, nil), tc.name)) {
			return
		}
		for _, piece := range split(tc.arguments, 3) {
			part := wireToolCall{Index: &k, Function: wireFunction{Arguments: piece}}
			if !send(withTokens(chunk(delta{ToolCalls: []wireToolCall{part}}, nil), piece)) {
				return
			}
		}
	}
	finish := rep.finishReason()
	if !send(chunk(delta{}, &finish)) {
		return
	}
	if req.includeUsage() {
		c := base
		c.Choices = []choice{}
		u := rep.usage(req)
		c.Usage = &u
		if !send(c) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// split cuts s into at most n pieces of about equal rune counts.
func split(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	if runes == 0 {
		return nil
	}
	size := (runes + n - 1) / n
	var out []string
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < size {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func completionID(req chatRequest) string {
	return fmt.Sprintf("chatcmpl-mock-%016x", conversationHash(req.Messages))
}
