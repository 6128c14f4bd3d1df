package gateway

import (
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// Trajectory answers trajectory and unregister calls.
type Trajectory struct {
	RolloutID string       `json:"rollout_id"`
	Turns     []trace.Turn `json:"turns"`
	// Prompt is the conversation's first request; Completion what came
	// after it: the later requests' new messages and the last answer.
	Prompt     []dialects.Message `json:"prompt"`
	Completion []dialects.Message `json:"completion"`
	// Tokens is each turn's token data, when the registration traces
	// tokens; the turns themselves then hold none.
	Tokens []TurnTokens `json:"tokens,omitempty"`
	// IsTruncated says a limit cut the rollout (Limit names it) or a turn
	// stopped at its max tokens (finish reason length).
	IsTruncated bool   `json:"is_truncated"`
	Limit       string `json:"limit,omitempty"`
}

// TurnTokens is one turn's token data in a Trajectory.
type TurnTokens struct {
	Turn         int    `json:"turn"`
	FinishReason string `json:"finish_reason,omitempty"`
	*dialects.Tokens
}

// trajectoryOf builds the trajectory of turns, a copy of a rollout's own:
// their token data moves to the trajectory's Tokens.
func trajectoryOf(id string, turns []trace.Turn) Trajectory {
	tr := Trajectory{RolloutID: id, Turns: turns, Prompt: []dialects.Message{}, Completion: []dialects.Message{}}
	if tr.Turns == nil {
		tr.Turns = []trace.Turn{}
	}
	var answered []trace.Turn
	for i, t := range turns {
		if t.Limit != "" && tr.Limit == "" {
			tr.Limit = t.Limit
		}
		if t.Limit != "" || t.Response.FinishReason == dialects.FinishLength {
			tr.IsTruncated = true
		}
		if t.Tokens != nil {
			tr.Tokens = append(tr.Tokens, TurnTokens{Turn: t.Index, FinishReason: t.Response.FinishReason, Tokens: t.Tokens})
			turns[i].Tokens = nil // once is enough: in Tokens
		}
		if t.Status/100 == 2 && len(t.Request.Messages) > 0 {
			answered = append(answered, t)
		}
	}
	if len(answered) == 0 {
		return tr
	}
	first, last := answered[0], answered[len(answered)-1]
	tr.Prompt = first.Request.Messages
	if n := len(first.Request.Messages); len(last.Request.Messages) >= n {
		tr.Completion = append(tr.Completion, last.Request.Messages[n:]...)
	}
	tr.Completion = append(tr.Completion, last.Response.Message)
	return tr
}
