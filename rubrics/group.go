package rubrics

import (
	"math"
	"sort"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// GroupRubric scores the rollouts of one task together, after each was
// scored alone: the rewards a trainer sees for a group.
type GroupRubric interface {
	ScoreGroup(task tasksets.Task, rewards []float64) []float64
}

// Group is a task's group of rollouts, scored.
type Group struct {
	Rewards    []float64
	Mean       float64
	Std        float64
	Advantages []float64
}

// ScoreGroup applies r's group scoring when it has one, then computes the
// group mean, standard deviation and advantages (reward - group mean).
func ScoreGroup(r Rubric, task tasksets.Task, rewards []float64) Group {
	g := Group{Rewards: append([]float64(nil), rewards...)}
	if gr, ok := r.(GroupRubric); ok {
		g.Rewards = gr.ScoreGroup(task, rewards)
	}
	if len(g.Rewards) == 0 {
		return g
	}
	for _, x := range g.Rewards {
		g.Mean += x
	}
	g.Mean /= float64(len(g.Rewards))
	for _, x := range g.Rewards {
		g.Std += (x - g.Mean) * (x - g.Mean)
		g.Advantages = append(g.Advantages, x-g.Mean)
	}
	g.Std = math.Sqrt(g.Std / float64(len(g.Rewards)))
	return g
}

// Ranked scores each rollout alone with Base, then rewards a group by rank:
// the best rollout of the group gets 1, the worst 0, ties share their mean rank.
type Ranked struct{ Base Rubric }

// Score scores one answer with the base rubric.
func (r Ranked) Score(task tasksets.Task, answer string) Score { return r.Base.Score(task, answer) }

// ScoreGroup maps rewards to their normalized rank in the group.
func (r Ranked) ScoreGroup(_ tasksets.Task, rewards []float64) []float64 {
	n := len(rewards)
	out := make([]float64, n)
	if n < 2 {
		copy(out, rewards)
		return out
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rewards[order[a]] < rewards[order[b]] })
	for i := 0; i < n; {
		j := i
		for j+1 < n && rewards[order[j+1]] == rewards[order[i]] {
			j++
		}
		rank := float64(i+j) / 2 / float64(n-1)
		for m := i; m <= j; m++ {
			out[order[m]] = rank
		}
		i = j + 1
	}
	return out
}

// parseGroup handles "rank:BASE".
func parseGroup(spec string) (Rubric, bool, error) {
	base, ok := strings.CutPrefix(strings.TrimSpace(spec), "rank:")
	if !ok {
		return nil, false, nil
	}
	r, err := Parse(base)
	if err != nil {
		return nil, true, err
	}
	return Ranked{Base: r}, true, nil
}
