package rubrics

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// tests is the part that takes the task's verifier's verdict: its reward,
// and its metrics under the part's name.
type tests struct{}

func (tests) check(in Input) error {
	if !in.Task.Verified() {
		return &ConfigError{Reason: fmt.Sprintf("task %q has no verifier (no tests or verify command) to take a reward from", in.Task.ID)}
	}
	return nil
}

func (tests) score(_ context.Context, in Input) (Score, error) {
	v := in.Verdict
	if v == nil {
		return Score{}, &ScoringError{Reason: "the task's verifier gave no verdict"}
	}
	s := Score{Reward: v.Reward, Metrics: maps.Clone(v.Metrics), Detail: "verifier reward " + fmtNum(v.Reward)}
	if len(v.Metrics) > 0 {
		names := slices.Sorted(maps.Keys(v.Metrics))
		shown := make([]string, len(names))
		for i, name := range names {
			shown[i] = name + " " + fmtNum(v.Metrics[name])
		}
		s.Detail = clip(s.Detail + " (" + strings.Join(shown, ", ") + ")")
	}
	return s, nil
}
