package rubrics

import (
	"context"
	"fmt"

	"github.com/evalflow/evalflow/tasksets"
)

// This file keeps the answer-only API of the worker's scoring until its
// callers move to Compile and Program; it goes with them.

// GroupRubric scores the rollouts of one task together, after each was
// scored alone: the rewards a trainer sees for a group.
//
// Deprecated: use Program.ScoreGroup.
type GroupRubric interface {
	ScoreGroup(task tasksets.Task, rewards []float64) []float64
}

// Parse compiles spec for a caller that scores an answer alone: a text
// rubric, a weighted combination of them, or rank: over either. A spec with
// a tests or judge part is refused, since such a caller cannot
// give those parts what they score.
//
// Deprecated: use Compile.
func Parse(spec string) (Rubric, error) {
	p, err := Compile(spec)
	if err != nil {
		return nil, err
	}
	if !p.answerOnly() {
		return nil, fmt.Errorf("rubric %q: tests and judge rubrics are not supported by this worker yet", p.spec)
	}
	if !p.rank && len(p.parts) == 1 {
		return p.parts[0].scorer.(text).Rubric, nil
	}
	return answerOnly{p}, nil
}

// ScoreGroup applies r's group scoring when it has one, then computes the
// group mean, standard deviation and advantages (reward - group mean).
//
// Deprecated: use Program.ScoreGroup.
func ScoreGroup(r Rubric, task tasksets.Task, rewards []float64) Group {
	if gr, ok := r.(GroupRubric); ok {
		return newGroup(gr.ScoreGroup(task, rewards))
	}
	return newGroup(append([]float64(nil), rewards...))
}

// answerOnly is a Program of text rubrics used as a Rubric.
type answerOnly struct{ p *Program }

func (a answerOnly) Score(task tasksets.Task, answer string) Score {
	// Text rubrics never fail.
	s, _ := a.p.Score(context.Background(), Input{Task: task, Answer: answer})
	return s
}

func (a answerOnly) ScoreGroup(task tasksets.Task, rewards []float64) []float64 {
	return a.p.ScoreGroup(task, rewards).Rewards
}
