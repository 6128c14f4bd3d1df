package sft_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export/sft"
	"github.com/evalflow/evalflow/rollout"
)

// --passed keeps successes at the pass threshold (1, or --min-reward);
// --min-reward alone keeps any rollout with that reward.
func TestFilterKeep(t *testing.T) {
	half := 0.5
	pass := results.Record{Status: rollout.StatusOK, Reward: 1}
	low := results.Record{Status: rollout.StatusOK, Reward: 0.5}
	failed := results.Record{Status: rollout.StatusError, Reward: 0.5}
	cases := []struct {
		filter sft.Filter
		rec    results.Record
		want   bool
	}{
		{sft.Filter{}, failed, true},
		{sft.Filter{Passed: true}, pass, true},
		{sft.Filter{Passed: true}, low, false},
		{sft.Filter{Passed: true}, failed, false},
		{sft.Filter{Passed: true, MinReward: &half}, low, true},
		{sft.Filter{Passed: true, MinReward: &half}, failed, false},
		{sft.Filter{MinReward: &half}, failed, true},
		{sft.Filter{MinReward: &half}, results.Record{Status: rollout.StatusOK, Reward: 0.25}, false},
	}
	for _, c := range cases {
		name := fmt.Sprintf("passed=%v min=%v %s/%v", c.filter.Passed, c.filter.MinReward != nil, c.rec.Status, c.rec.Reward)
		assert.Equal(t, c.want, c.filter.Keep(c.rec), "Keep(%s) = %v, want %v", name, !c.want, c.want)
	}
}
