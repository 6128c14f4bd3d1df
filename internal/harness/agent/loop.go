package agent

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// call is a tool call the model made.
type call struct {
	id, name, arguments string
}

// reply is one model turn: tool calls, or a final answer.
type reply struct {
	calls   []call
	answer  string
	refusal string
}

// session is a conversation in one dialect, on that dialect's official SDK.
type session interface {
	// next makes one model call and keeps the model's turn in the conversation.
	next(ctx context.Context) (reply, error)
	// results adds the tool results of the last turn's calls, in order.
	results(calls []call, outputs []result)
}

// agent runs one conversation against the model.
type agent struct {
	session session
	tools   *tools
	out     io.Writer
}

// run loops model calls and tool executions until the model answers without
// calling a tool, and returns that answer. maxTurns 0 means no bound.
func (a *agent) run(ctx context.Context, maxTurns int) (string, error) {
	for turn := 1; maxTurns == 0 || turn <= maxTurns; turn++ {
		r, err := a.session.next(ctx)
		if err != nil {
			return "", fmt.Errorf("turn %d: %w", turn, err)
		}
		if len(r.calls) == 0 {
			if r.refusal != "" && r.answer == "" {
				fmt.Fprintf(a.out, "turn %d: refusal\n", turn)
			} else {
				fmt.Fprintf(a.out, "turn %d: answer (%d chars)\n", turn, len(r.answer))
			}
			return r.answer, nil
		}
		var outputs []result
		var lines []string
		for _, c := range r.calls {
			res := a.tools.run(ctx, c.name, c.arguments)
			if res.text == "" {
				// Anthropic refuses an empty tool result.
				res.text = "(no output)"
			}
			outputs = append(outputs, res)
			lines = append(lines, fmt.Sprintf("%s -> %s", c.name, clip(res.text)))
		}
		a.session.results(r.calls, outputs)
		fmt.Fprintf(a.out, "turn %d: %s\n", turn, strings.Join(lines, "; "))
	}
	return "", errTurnLimit
}

// clip keeps a tool result short on the progress line: its first line, cut.
func clip(s string) string {
	const limit = 40
	s, _, _ = strings.Cut(s, "\n")
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
