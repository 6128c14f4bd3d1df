package rubrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

func TestScoreGroup(t *testing.T) {
	g := ScoreGroup(Numeric{}, tasksets.Task{}, []float64{1, 0, 1, 0})
	assert.Equal(t, 0.5, g.Mean)
	assert.Equal(t, 0.5, g.Std)
	assert.Equal(t, []float64{0.5, -0.5, 0.5, -0.5}, g.Advantages)

	empty := ScoreGroup(Numeric{}, tasksets.Task{}, nil)
	assert.Zero(t, empty.Mean)
	assert.Empty(t, empty.Advantages)
}

func TestRankedGroups(t *testing.T) {
	r, err := Parse("rank:numeric")
	require.NoError(t, err)
	require.Implements(t, (*GroupRubric)(nil), r)
	for _, tc := range []struct{ in, want []float64 }{
		{[]float64{0.2, 0.9, 0.5}, []float64{0, 1, 0.5}},
		{[]float64{1, 1, 0, 0}, []float64{5.0 / 6, 5.0 / 6, 1.0 / 6, 1.0 / 6}},
		{[]float64{0.3}, []float64{0.3}},
	} {
		got := r.(GroupRubric).ScoreGroup(tasksets.Task{}, tc.in)
		assert.InDeltaSlice(t, tc.want, got, 1e-12, "ScoreGroup(%v)", tc.in)
	}
	_, err = Parse("rank:nope")
	assert.Error(t, err)
}
