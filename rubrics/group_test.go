package rubrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

func TestScoreGroup(t *testing.T) {
	p, err := Compile("numeric")
	require.NoError(t, err)
	rewards := []float64{1, 0, 1, 0}
	g := p.ScoreGroup(tasksets.Task{}, rewards)
	assert.Equal(t, rewards, g.Rewards)
	assert.Equal(t, 0.5, g.Mean)
	assert.Equal(t, 0.5, g.Std)
	assert.Equal(t, []float64{0.5, -0.5, 0.5, -0.5}, g.Advantages)

	g.Rewards[0] = 7
	assert.Equal(t, 1.0, rewards[0], "ScoreGroup keeps a copy of the rewards")

	empty := p.ScoreGroup(tasksets.Task{}, nil)
	assert.Zero(t, empty.Mean)
	assert.Empty(t, empty.Advantages)
}

func TestRankedGroups(t *testing.T) {
	for _, spec := range []string{"rank:numeric", "rank:tests*0.8+judge*0.2"} {
		p, err := Compile(spec)
		require.NoError(t, err)
		for _, tc := range []struct{ in, want []float64 }{
			{[]float64{0.2, 0.9, 0.5}, []float64{0, 1, 0.5}},
			{[]float64{1, 1, 0, 0}, []float64{5.0 / 6, 5.0 / 6, 1.0 / 6, 1.0 / 6}},
			{[]float64{0.3}, []float64{0.3}},
		} {
			got := p.ScoreGroup(tasksets.Task{}, tc.in)
			assert.InDeltaSlice(t, tc.want, got.Rewards, 1e-12, "%s: ScoreGroup(%v)", spec, tc.in)
		}
	}
	_, err := Compile("rank:nope")
	assert.Error(t, err)
}
