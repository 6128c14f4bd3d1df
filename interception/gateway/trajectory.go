package gateway

import (
	"net/http"
	"strconv"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
)

// Trajectory answers trajectory and unregister calls: verifiers'
// trajectory (Trajectory, Prompt, Completion, IsTruncated), the samples
// a trainer learns from, and the recorded turns.
type Trajectory struct {
	RolloutID string `json:"rollout_id"`
	// Trajectory is a step per answered model call, in verifiers' shape
	// (package trajectory), each marked OffPolicySteps when the call asked
	// with a policy_version.
	Trajectory []Step `json:"trajectory"`
	// Interleavable and PrefixBreaks say whether each step's prompt ids
	// extend the step before it exactly (trajectory.Trajectory).
	Interleavable bool  `json:"interleavable"`
	PrefixBreaks  []int `json:"prefix_breaks"`
	// View is how Samples is made: "interleaved" (the default) or "steps".
	View    string              `json:"view"`
	Samples []trajectory.Sample `json:"samples"`
	// PolicyVersion is the trainer's version the call named; Stale is set
	// when a step lags it by more than the registration's
	// MaxOffPolicySteps. Marking only: rerunning is the trainer's call.
	PolicyVersion     *int64 `json:"policy_version,omitempty"`
	MaxOffPolicySteps *int   `json:"max_off_policy_steps,omitempty"`
	Stale             bool   `json:"stale"`

	Turns []trace.Turn `json:"turns"`
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

// Step is a trajectory step and how far it is off the trainer's policy.
type Step struct {
	trajectory.Step
	// OffPolicySteps is the trainer's policy_version less the step's;
	// absent when either is unknown.
	OffPolicySteps *int64 `json:"off_policy_steps,omitempty"`
}

// query is what a trajectory or unregister call asks of the answer.
type query struct {
	view          string
	policyVersion *int64
	maxOffPolicy  *int // the registration's
}

// readQuery reads view and policy_version, or answers a 400 naming what
// is wrong.
func readQuery(w http.ResponseWriter, r *http.Request) (query, bool) {
	q := query{view: r.URL.Query().Get("view")}
	if q.view == "" {
		q.view = trajectory.ViewInterleaved
	}
	if _, err := (trajectory.Trajectory{}).Samples(q.view); err != nil {
		writeError(w, http.StatusBadRequest, "trajectory: "+err.Error())
		return q, false
	}
	if v := r.URL.Query().Get("policy_version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "trajectory: policy_version "+strconv.Quote(v)+": want the trainer's current policy version, an integer 0 or more")
			return q, false
		}
		q.policyVersion = &n
	}
	return q, true
}

// trajectoryOf builds the trajectory of turns, a copy of a rollout's own:
// their token data moves to the trajectory's Tokens.
func trajectoryOf(id string, turns []trace.Turn, q query) Trajectory {
	tj := trajectory.FromTurns(turns) // before the token data moves
	samples, _ := tj.Samples(q.view)  // the view is checked (readQuery)
	tr := Trajectory{RolloutID: id, Turns: turns, Prompt: []dialects.Message{}, Completion: []dialects.Message{},
		Trajectory: make([]Step, len(tj.Steps)), Interleavable: tj.Interleavable, PrefixBreaks: tj.PrefixBreaks,
		View: q.view, Samples: samples, PolicyVersion: q.policyVersion, MaxOffPolicySteps: q.maxOffPolicy}
	for i, s := range tj.Steps {
		tr.Trajectory[i].Step = s
		if q.policyVersion == nil || s.PolicyVersion == nil {
			continue
		}
		off := *q.policyVersion - *s.PolicyVersion
		tr.Trajectory[i].OffPolicySteps = &off
		if q.maxOffPolicy != nil && off > int64(*q.maxOffPolicy) {
			tr.Stale = true
		}
	}
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
