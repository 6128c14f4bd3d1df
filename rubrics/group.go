package rubrics

import (
	"math"
	"sort"
)

// Group is a task's group of rollouts, scored.
type Group struct {
	Rewards    []float64
	Mean       float64
	Std        float64
	Advantages []float64
}

// newGroup computes the group mean, standard deviation and advantages
// (reward - group mean) of rewards, which it keeps.
func newGroup(rewards []float64) Group {
	g := Group{Rewards: rewards}
	if len(rewards) == 0 {
		return g
	}
	for _, x := range rewards {
		g.Mean += x
	}
	g.Mean /= float64(len(rewards))
	for _, x := range rewards {
		g.Std += (x - g.Mean) * (x - g.Mean)
		g.Advantages = append(g.Advantages, x-g.Mean)
	}
	g.Std = math.Sqrt(g.Std / float64(len(rewards)))
	return g
}

// ranks maps rewards to their normalized rank in the group: the best gets 1,
// the worst 0, ties share their mean rank. A group of one keeps its reward.
func ranks(rewards []float64) []float64 {
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
