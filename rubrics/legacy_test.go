package rubrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want Rubric
	}{
		{"exact", Exact{}},
		{" exact ", Exact{}},
		{"contains", Contains{}},
		{"numeric", Numeric{}},
		{"numeric:0.01", Numeric{Tolerance: 0.01}},
		{"regex", Regex{}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.spec)
		require.NoError(t, err, "Parse(%q)", tt.spec)
		assert.Equal(t, tt.want, got, "Parse(%q) = %v, want %v", tt.spec, got, tt.want)
	}

	r, err := Parse(`regex:^\d+$`)
	require.NoError(t, err)
	assert.Equal(t, `^\d+$`, r.(Regex).Pattern.String())
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		spec string
		want string
	}{
		{"fuzzy", `unknown rubric "fuzzy" (valid: exact, numeric`},
		{"", `unknown rubric ""`},
		{"exact:1", "unknown rubric"},
		{"numeric:abc", `tolerance "abc"`},
		{"numeric:-1", `tolerance "-1"`},
		{"numeric:NaN", `tolerance "NaN"`},
		{"regex:(", "missing closing )"},
		// A caller that scores an answer alone cannot score these.
		{"tests", `rubric "tests": tests and judge rubrics are not supported by this worker yet`},
		{"rank:judge", "not supported by this worker yet"},
		{"exact*0.5+judge", "not supported by this worker yet"},
	}
	for _, tt := range tests {
		r, err := Parse(tt.spec)
		require.Error(t, err, "Parse(%q) = %v, want an error", tt.spec, r)
		assert.Contains(t, err.Error(), tt.want, "Parse(%q)", tt.spec)
	}
}

func TestParseScoresAsCompile(t *testing.T) {
	for _, tt := range scoreTests {
		r, err := Parse(tt.spec)
		require.NoError(t, err)
		got := r.Score(tasksets.Task{ID: "t", Answer: tt.want}, tt.answer)
		assert.Equal(t, tt.reward, got.Reward, "%s: Score(answer %q, task answer %q) = %v (%s), want %v",
			tt.spec, tt.answer, tt.want, got.Reward, got.Detail, tt.reward)
	}

	r, err := Parse("0.25*exact + 0.75*numeric")
	require.NoError(t, err)
	got := r.Score(tasksets.Task{Answer: "42"}, "It is 42 apples")
	assert.Equal(t, 0.75, got.Reward)
	assert.Equal(t, map[string]float64{"exact": 0, "numeric": 1}, got.Metrics)
}

func TestLegacyScoreGroup(t *testing.T) {
	g := ScoreGroup(Numeric{}, tasksets.Task{}, []float64{1, 0, 1, 0})
	assert.Equal(t, 0.5, g.Mean)
	assert.Equal(t, 0.5, g.Std)
	assert.Equal(t, []float64{0.5, -0.5, 0.5, -0.5}, g.Advantages)

	empty := ScoreGroup(Numeric{}, tasksets.Task{}, nil)
	assert.Zero(t, empty.Mean)
	assert.Empty(t, empty.Advantages)

	r, err := Parse("rank:numeric")
	require.NoError(t, err)
	require.Implements(t, (*GroupRubric)(nil), r)
	ranked := ScoreGroup(r, tasksets.Task{}, []float64{0.2, 0.9, 0.5})
	assert.InDeltaSlice(t, []float64{0, 1, 0.5}, ranked.Rewards, 1e-12)
	_, err = Parse("rank:nope")
	assert.Error(t, err)
}
