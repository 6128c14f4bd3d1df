// Package trajectory turns a rollout's recorded turns into what an RL
// trainer learns from: one step per answered model call, in the field names
// of verifiers' trajectory steps (prompt_ids, prompt_mask, completion_ids,
// completion_mask, completion_logprobs), each with the policy version that
// answered it and whether its prompt went in as tokens.
//
// A multi-turn rollout can be trained on as one sequence only when each
// step's prompt ids begin with exactly the previous step's prompt and
// completion ids (the "exact prefix"): the tokens the policy sampled, not
// a re-tokenization of their text, which may differ and would have the
// importance ratio computed on tokens the policy never produced. FromTurns
// checks every step; Interleaved makes one sample per run of steps that
// extend each other (a new sample where the prefix breaks), PerStep one
// sample per step.
package trajectory

import (
	"encoding/json"
	"fmt"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// Tokens is a step's or a sample's token data. A mask is 1 on the tokens
// the policy sampled (to learn from) and 0 on the others (the prompt, the
// environment's messages between turns); CompletionLogprobs has one
// number per completion token, 0 where the mask is 0.
type Tokens struct {
	PromptIDs          []int32   `json:"prompt_ids"`
	PromptMask         []int     `json:"prompt_mask"`
	CompletionIDs      []int32   `json:"completion_ids"`
	CompletionMask     []int     `json:"completion_mask"`
	CompletionLogprobs []float32 `json:"completion_logprobs"`
}

// Step is one answered model call.
type Step struct {
	// Turn is the call's index in the rollout's trace.
	Turn int `json:"turn"`
	// Prompt is the messages the call sent, Completion the answer; absent
	// when built from token data alone (FromSummary).
	Prompt     []dialects.Message `json:"prompt,omitempty"`
	Completion []dialects.Message `json:"completion,omitempty"`
	// Tokens is nil when the upstream returned no token data.
	Tokens       *Tokens `json:"tokens"`
	FinishReason string  `json:"finish_reason,omitempty"`
	// IsTruncated: the completion stopped at its max tokens.
	IsTruncated bool `json:"is_truncated"`
	// TokenIn: the prompt went to the upstream as token ids.
	TokenIn bool `json:"token_in"`
	// PolicyVersion is the version of the policy that answered; nil when
	// unknown.
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	// ExtendsPrevious: the prompt ids begin with exactly the previous
	// step's prompt and completion ids. False on the first step.
	ExtendsPrevious bool `json:"extends_previous"`
	// MissingLogprobs: the upstream returned fewer log probabilities than
	// completion tokens; the missing ones are 0 in CompletionLogprobs.
	MissingLogprobs bool `json:"missing_logprobs,omitempty"`
}

// Trajectory is a rollout's steps and how they may be trained on.
type Trajectory struct {
	Steps []Step `json:"steps"`
	// Interleavable: every step has token data and each after the first
	// extends the one before exactly, so the rollout is one sample.
	Interleavable bool `json:"interleavable"`
	// PrefixBreaks are the indices in Steps of the steps after the first
	// that have token data and do not extend the step before them: an
	// interleaved sample starts there.
	PrefixBreaks []int `json:"prefix_breaks"`
}

// Sample is one sequence to train on: the steps it holds (indices in
// Steps) and their tokens, masked.
type Sample struct {
	Steps []int `json:"steps"`
	Tokens
}

// Views name the ways a trajectory is made into samples.
const (
	ViewInterleaved = "interleaved"
	ViewSteps       = "steps"
)

// FromTurns builds the trajectory of a rollout's turns: a step per turn
// the upstream answered (a 2xx status, no limit refused it).
func FromTurns(turns []trace.Turn) Trajectory {
	var steps []Step
	for _, t := range turns {
		if t.Status/100 != 2 || t.Limit != "" {
			continue
		}
		s := Step{Turn: t.Index, Prompt: t.Request.Messages, FinishReason: t.Response.FinishReason,
			IsTruncated: t.Response.FinishReason == dialects.FinishLength, TokenIn: t.TokenIn,
			PolicyVersion: t.PolicyVersion, Tokens: tokensOf(t.Tokens)}
		s.MissingLogprobs = s.Tokens != nil && len(t.Tokens.Logprobs) < len(t.Tokens.CompletionIDs)
		if t.Response.Message.Role != "" {
			s.Completion = []dialects.Message{t.Response.Message}
		}
		steps = append(steps, s)
	}
	return link(steps)
}

// FromSummary builds a trajectory from the token data a rollout's summary
// carries (rollout.Summary.Tokens): its steps have no messages.
func FromSummary(turns []rollout.TurnTokens) (Trajectory, error) {
	steps := make([]Step, 0, len(turns))
	for _, t := range turns {
		var data dialects.Tokens
		if len(t.Data) > 0 {
			if err := json.Unmarshal(t.Data, &data); err != nil {
				return Trajectory{}, fmt.Errorf("token data of turn %d: %w", t.Turn, err)
			}
		}
		steps = append(steps, Step{Turn: t.Turn, FinishReason: t.FinishReason,
			IsTruncated: t.FinishReason == dialects.FinishLength, TokenIn: t.TokenIn,
			PolicyVersion: t.PolicyVersion, Tokens: tokensOf(&data),
			MissingLogprobs: len(data.CompletionIDs) > 0 && len(data.Logprobs) < len(data.CompletionIDs)})
	}
	return link(steps), nil
}

// tokensOf is a step's tokens from a turn's recorded data: nil without
// completion ids.
func tokensOf(d *dialects.Tokens) *Tokens {
	if d == nil || len(d.CompletionIDs) == 0 {
		return nil
	}
	t := &Tokens{
		PromptIDs:          append([]int32{}, d.PromptIDs...),
		PromptMask:         make([]int, len(d.PromptIDs)),
		CompletionIDs:      append([]int32{}, d.CompletionIDs...),
		CompletionMask:     ones(len(d.CompletionIDs)),
		CompletionLogprobs: make([]float32, len(d.CompletionIDs)),
	}
	copy(t.CompletionLogprobs, d.Logprobs)
	return t
}

// link checks each step against the one before it.
func link(steps []Step) Trajectory {
	tr := Trajectory{Steps: steps, Interleavable: len(steps) > 0, PrefixBreaks: []int{}}
	if tr.Steps == nil {
		tr.Steps = []Step{}
	}
	for i := range steps {
		s := &steps[i]
		if s.Tokens == nil {
			tr.Interleavable = false
			continue
		}
		if i > 0 && extends(steps[i-1].Tokens, s.Tokens) {
			s.ExtendsPrevious = true
			continue
		}
		if i > 0 {
			tr.Interleavable = false
			tr.PrefixBreaks = append(tr.PrefixBreaks, i)
		}
	}
	return tr
}

// extends reports whether next's prompt begins with prev's prompt and
// completion, id for id.
func extends(prev, next *Tokens) bool {
	if prev == nil {
		return false
	}
	n := len(prev.PromptIDs) + len(prev.CompletionIDs)
	if len(next.PromptIDs) < n {
		return false
	}
	for i, id := range prev.PromptIDs {
		if next.PromptIDs[i] != id {
			return false
		}
	}
	for i, id := range prev.CompletionIDs {
		if next.PromptIDs[len(prev.PromptIDs)+i] != id {
			return false
		}
	}
	return true
}

// Samples is the trajectory as view makes it: ViewInterleaved (or "")
// or ViewSteps.
func (t Trajectory) Samples(view string) ([]Sample, error) {
	switch view {
	case "", ViewInterleaved:
		return t.Interleaved(), nil
	case ViewSteps:
		return t.PerStep(), nil
	}
	return nil, fmt.Errorf("view %q: want %q or %q", view, ViewInterleaved, ViewSteps)
}

// PerStep is one sample per step with token data.
func (t Trajectory) PerStep() []Sample {
	out := []Sample{}
	for i, s := range t.Steps {
		if s.Tokens != nil {
			out = append(out, Sample{Steps: []int{i}, Tokens: clone(*s.Tokens)})
		}
	}
	return out
}

// Interleaved is one sample per run of steps that extend each other: the
// first step's prompt, then each step's completion (mask 1) and the
// tokens between it and the next step's completion (the environment's
// messages, mask 0, log probability 0).
func (t Trajectory) Interleaved() []Sample {
	out := []Sample{}
	var cur *Sample
	var prev *Tokens
	for i, s := range t.Steps {
		if s.Tokens == nil {
			cur, prev = nil, nil
			continue
		}
		if cur == nil || !s.ExtendsPrevious || prev == nil {
			out = append(out, Sample{Steps: []int{i}, Tokens: clone(*s.Tokens)})
			cur, prev = &out[len(out)-1], s.Tokens
			continue
		}
		env := s.Tokens.PromptIDs[len(prev.PromptIDs)+len(prev.CompletionIDs):]
		cur.Steps = append(cur.Steps, i)
		cur.CompletionIDs = append(cur.CompletionIDs, env...)
		cur.CompletionMask = append(cur.CompletionMask, make([]int, len(env))...)
		cur.CompletionLogprobs = append(cur.CompletionLogprobs, make([]float32, len(env))...)
		cur.CompletionIDs = append(cur.CompletionIDs, s.Tokens.CompletionIDs...)
		cur.CompletionMask = append(cur.CompletionMask, s.Tokens.CompletionMask...)
		cur.CompletionLogprobs = append(cur.CompletionLogprobs, s.Tokens.CompletionLogprobs...)
		prev = s.Tokens
	}
	return out
}

func clone(t Tokens) Tokens {
	return Tokens{
		PromptIDs:          append([]int32{}, t.PromptIDs...),
		PromptMask:         append([]int{}, t.PromptMask...),
		CompletionIDs:      append([]int32{}, t.CompletionIDs...),
		CompletionMask:     append([]int{}, t.CompletionMask...),
		CompletionLogprobs: append([]float32{}, t.CompletionLogprobs...),
	}
}

func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}
