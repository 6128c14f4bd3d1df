package rubrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Input is what a Program scores: one finished rollout, as the activity
// that ran it fills it in.
type Input struct {
	Task tasksets.Task
	// Answer is the harness's final answer.
	Answer string
	// Workspace is the host directory of the agent's workspace after the
	// run; "" for a task without one.
	Workspace string
	// Verdict is the task's verifier's result; nil when it has no verifier.
	Verdict *Verdict
	// Transcript is the conversation as a judge may be shown it.
	Transcript []Message
	// State is the rollout's shared state at the end (what its tool
	// servers and user left at {base}/state), a JSON object; nil when
	// nothing wrote it.
	State json.RawMessage
	// Judge asks a model; nil when the worker has none.
	Judge Judge
	// Env is the environment command parts run with, before the variables
	// of their contract (Command*Env); nil is this process's own. The
	// activity gives the worker's without its credentials.
	Env []string
}

// Verdict is what a task's verifier concluded about a rollout.
type Verdict struct {
	Reward  float64
	Metrics map[string]float64
}

// Message is one message of a rollout's conversation.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string `json:"role"`
	// Text is the message's text; an assistant's tool calls are written out
	// in it as text.
	Text string `json:"text"`
}

// Judge asks a model for a judgement: a prompt in, the reply's text out.
// Model "" asks the judge's default model. The activity implements it over
// the worker's providers and records each call in the rollout's trace.
type Judge interface {
	Ask(ctx context.Context, model, prompt string) (string, error)
}

// JudgeFunc is a function used as a Judge.
type JudgeFunc func(ctx context.Context, model, prompt string) (string, error)

// Ask calls f.
func (f JudgeFunc) Ask(ctx context.Context, model, prompt string) (string, error) {
	return f(ctx, model, prompt)
}

// Program is a compiled rubric spec: one part or a weighted combination of
// parts, each scored on its own and reported as a metric under its name.
// A Program is immutable and safe for concurrent use.
type Program struct {
	spec  string
	rank  bool
	parts []part
	total float64 // the sum of the parts' weights
}

// part is one term of a spec.
type part struct {
	// name is the part's metric name: its label, else its kind.
	name   string
	weight float64
	scorer scorer
}

// scorer scores one part of a spec.
type scorer interface {
	score(ctx context.Context, in Input) (Score, error)
}

// checker is a scorer with conditions that are known before the rollout
// runs (a verifier, a judge); check returns a *ConfigError.
type checker interface {
	check(in Input) error
}

// String returns the spec p was compiled from.
func (p *Program) String() string { return p.spec }

// UsesVerifier reports whether a part of p is the task's verifier (tests),
// so that the verifier's verdict is combined with the other parts rather
// than standing alone.
func (p *Program) UsesVerifier() bool {
	for _, pt := range p.parts {
		if _, ok := pt.scorer.(tests); ok {
			return true
		}
	}
	return false
}

// Check reports whether p can score rollouts of in.Task on a worker that
// gives in.Judge, before any runs: a tests part needs a task with a
// verifier, a judge part needs a Judge. The error is a *ConfigError.
func (p *Program) Check(in Input) error {
	for _, pt := range p.parts {
		c, ok := pt.scorer.(checker)
		if !ok {
			continue
		}
		if err := c.check(in); err != nil {
			return named(err, pt.name)
		}
	}
	return nil
}

// Score scores one rollout: each part in turn, then the weighted mean of
// their rewards. Its error is a *ConfigError (see Check) or a *ScoringError:
// the rollout could not be scored, which is never a reward of 0.
func (p *Program) Score(ctx context.Context, in Input) (Score, error) {
	if err := p.Check(in); err != nil {
		return Score{}, err
	}
	out := Score{Metrics: make(map[string]float64, len(p.parts))}
	details := make([]string, 0, len(p.parts))
	sum := 0.0
	for _, pt := range p.parts {
		s, err := pt.scorer.score(ctx, in)
		if err != nil {
			return Score{}, named(err, pt.name)
		}
		if math.IsNaN(s.Reward) || math.IsInf(s.Reward, 0) {
			return Score{}, &ScoringError{Part: pt.name, Reason: fmt.Sprintf("reward %v is not a number", s.Reward)}
		}
		out.Metrics[pt.name] = s.Reward
		for k, v := range s.Metrics {
			out.Metrics[pt.name+"."+k] = v
		}
		sum += pt.weight * s.Reward
		out.Detail = s.Detail
		details = append(details, fmt.Sprintf("%s %s: %s", pt.name, fmtNum(s.Reward), s.Detail))
	}
	if len(p.parts) > 1 {
		out.Reward, out.Detail = sum/p.total, strings.Join(details, "; ")
	} else {
		out.Reward = out.Metrics[p.parts[0].name]
	}
	return out, nil
}

// ScoreGroup scores a task's group of rollouts together from their rewards,
// each scored alone: ranked for a rank: spec (the best rollout of the group
// gets 1, the worst 0, ties share their mean rank), as they are otherwise,
// with the group's mean, standard deviation and advantages.
func (p *Program) ScoreGroup(_ tasksets.Task, rewards []float64) Group {
	if p.rank {
		return newGroup(ranks(rewards))
	}
	return newGroup(append([]float64(nil), rewards...))
}

// named sets the part's name on a part's error.
func named(err error, name string) error {
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Part == "" {
		ce.Part = name
	}
	var se *ScoringError
	if errors.As(err, &se) && se.Part == "" {
		se.Part = name
	}
	return err
}

// text is a part scored by a text rubric from the answer alone.
type text struct{ Rubric }

func (t text) score(_ context.Context, in Input) (Score, error) {
	return t.Score(in.Task, in.Answer), nil
}
