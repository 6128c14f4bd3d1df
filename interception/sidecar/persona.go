package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// Placeholders of a persona's prompt template.
const (
	PersonaPrompt       = "{{prompt}}"
	PersonaConversation = "{{conversation}}"
)

// personaDone is the marker of a persona's reply that ends the
// conversation (tasksets.UserDone).
const personaDone = "[DONE]"

// sideTask is what the persona needs of a rollout's task.
type sideTask struct {
	Prompt   string `json:"prompt"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	User *struct {
		Persona  string `json:"persona"`
		MaxTurns int    `json:"max_turns"`
	} `json:"user"`
}

// defaultPersonaTurns bounds a persona's turns when the task sets none
// (tasksets.DefaultUserTurns).
const defaultPersonaTurns = 8

// personaMessage is one message of the conversation a harness posts.
type personaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// persona answers a user turn with the task's persona, run through the
// proxy's upstream with the rollout's model: its prompt template filled
// with the task's prompt and the conversation. The call is the user's,
// not the agent's: it counts against none of the rollout's limits, is
// kept on the user turn, and is refused past the user's max_turns, so
// that a harness cannot spend the provider's tokens through it.
func (h *Handler) persona(ctx context.Context, ro Rollout, conversation []personaMessage) (string, bool, *trace.Turn, error) {
	_, raw, used := ro.State().read()
	var task sideTask
	if raw == nil || json.Unmarshal(raw, &task) != nil || task.User == nil || task.User.Persona == "" {
		return "", false, nil, errNoPersona
	}
	limit := task.User.MaxTurns
	if limit <= 0 {
		limit = defaultPersonaTurns
	}
	if used >= limit {
		return "", false, nil, errPersonaTurns
	}
	prompt := renderPersona(task.User.Persona, taskPrompt(task), conversation)
	req := dialects.Request{Model: ro.Model(), Messages: []dialects.Message{
		{Role: dialects.RoleUser, Content: []dialects.Part{{Type: dialects.PartText, Text: prompt}}},
	}}
	turn := &trace.Turn{Route: "user", Request: req, StartedAt: time.Now()}
	text, err := h.proxy.Ask(ctx, ro, turn)
	turn.Latency = time.Since(turn.StartedAt)
	if err != nil {
		turn.Error = err.Error()
		return "", false, turn, err
	}
	done := strings.Contains(text, personaDone)
	text = strings.TrimSpace(strings.ReplaceAll(text, personaDone, ""))
	return text, done || text == "", turn, nil
}

var (
	errNoPersona    = errors.New("the rollout's task has no persona user")
	errPersonaTurns = errors.New("the persona has had its turns")
)

// taskPrompt is the task's prompt, or its last user message.
func taskPrompt(t sideTask) string {
	if t.Prompt != "" {
		return t.Prompt
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].Role == dialects.RoleUser {
			return t.Messages[i].Content
		}
	}
	return ""
}

// renderPersona fills a persona's template; a template without the
// conversation's placeholder gets the conversation after it.
func renderPersona(template, prompt string, conversation []personaMessage) string {
	var b strings.Builder
	for _, m := range conversation {
		fmt.Fprintf(&b, "%s: %s\n\n", m.Role, m.Content)
	}
	conv := strings.TrimSpace(b.String())
	out := strings.ReplaceAll(template, PersonaPrompt, prompt)
	if !strings.Contains(out, PersonaConversation) {
		return out + "\n\n" + conv
	}
	return strings.ReplaceAll(out, PersonaConversation, conv)
}
