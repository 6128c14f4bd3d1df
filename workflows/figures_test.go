package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/temporal"
)

func TestFiguresString(t *testing.T) {
	tests := []struct {
		f    Figures
		want string
	}{
		{Figures{Rollouts: 10, Done: 4, Running: 3, MeanReward: 0.5}, "4/10 rollouts done, none failed, 3 running, mean reward 0.500"},
		{Figures{Rollouts: 10, Done: 10, Failed: 3, Errors: []KindCount{{Kind: "harness", Count: 1}, {Kind: "infra", Count: 2}}, MeanReward: 0.25, Finished: true},
			"finished: 10 rollouts, 3 failed (harness 1, infra 2), mean reward 0.250"},
		{Figures{Rollouts: 10, Done: 10, Failed: 2, Errors: []KindCount{{Kind: "config", Count: 2}}, Refused: 2, MeanReward: 0.75, Finished: true},
			"finished: 10 rollouts, 2 failed (config 2), mean reward 0.750"},
		{Figures{Rollouts: 3, Done: 3, Failed: 3, Errors: []KindCount{{Kind: "config", Count: 3}}, Refused: 3, Finished: true},
			"finished: 3 rollouts, 3 failed (config 3), no rollout scored"},
		{Figures{Rollouts: 10, Running: 2}, "0/10 rollouts done, none failed, 2 running, no rollout scored"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.f.String(), "%+v", tt.f)
	}
}

func TestRunAttributesKeepsEvalflowsOwn(t *testing.T) {
	change := temporal.NewSearchAttributeKeyKeywordList("TemporalChangeVersion")
	have := temporal.NewSearchAttributes(
		temporal.NewSearchAttributeKeyKeyword(AttrRunID).ValueSet("r1"),
		temporal.NewSearchAttributeKeyKeyword(AttrModel).ValueSet("m"),
		change.ValueSet([]string{"ui-metadata-1"}),
	)
	got := runAttributes(have)
	assert.Equal(t, 2, got.Size(), "the run id and model, not the change versions")
	v, ok := got.GetKeyword(temporal.NewSearchAttributeKeyKeyword(AttrRunID))
	assert.True(t, ok)
	assert.Equal(t, "r1", v)
	assert.False(t, got.ContainsKey(change))
	assert.Equal(t, 0, runAttributes(temporal.SearchAttributes{}).Size(), "a run without attributes passes none on")
}
