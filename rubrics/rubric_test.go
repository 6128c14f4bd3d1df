package rubrics

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

// scoreTests are answers scored by the text rubrics.
var scoreTests = []struct {
	spec   string
	want   string // task answer
	answer string
	reward float64
}{
	{"exact", "Paris", "paris", 1},
	{"exact", "Paris", "  Paris. ", 1},
	{"exact", "new   york", "New York", 1},
	{"exact", "Paris", "Paris, France", 0},
	{"exact", "", "", 0},

	{"numeric", "6216", "The answer is 6216.", 1},
	{"numeric", "6216", "The answer is 6,216.", 1},
	{"numeric", "6,216", "6216", 1},
	{"numeric", "6216", "First 12 * 37 = 444, then 444 * 14 = 6216", 1},
	{"numeric", "6216", "6216 is wrong, it is 6217", 0},
	{"numeric", "-31", "It is -31 degrees.", 1},
	{"numeric", "-31", "It is −31 degrees.", 1},
	{"numeric", "4", "pages 3-4", 1},
	{"numeric", "4.5", "4.50 dollars", 1},
	{"numeric", "0.5", "about .5", 1},
	{"numeric", "0.3", "0.30000000000000004", 1},
	{"numeric", "42", `so \boxed{42} and 43 is not it`, 1},
	{"numeric", "42", `\boxed{\frac{84}{2}} no, \boxed{42}`, 1},
	{"numeric", "42", "no number here", 0},
	{"numeric", "forty", "40", 0},
	{"numeric", "", "40", 0},
	{"numeric:0.01", "3.14159", "pi is 3.14", 1},
	{"numeric:0.001", "3.14159", "pi is 3.14", 0},

	{"contains", "Paris", "The capital is paris.", 1},
	{"contains", "Paris", "The capital is Lyon.", 0},
	{"contains", "", "anything", 0},

	{"regex", `^\d+$`, "123", 1},
	{"regex", `^\d+$`, " 123\n", 1},
	{"regex", `^\d+$`, "12a", 0},
	{"regex", `(`, "(", 0},
	{`regex:(?i)^yes\b`, "", "Yes, indeed", 1},
	{`regex:(?i)^yes\b`, "", "no", 0},
}

func TestScore(t *testing.T) {
	ctx := context.Background()
	for _, tt := range scoreTests {
		p, err := Compile(tt.spec)
		require.NoError(t, err)
		got, err := p.Score(ctx, Input{Task: tasksets.Task{ID: "t", Answer: tt.want}, Answer: tt.answer})
		require.NoError(t, err, "%s: Score(%q)", tt.spec, tt.answer)
		assert.Equal(t, tt.reward, got.Reward, "%s: Score(answer %q, task answer %q) = %v (%s), want %v",
			tt.spec, tt.answer, tt.want, got.Reward, got.Detail, tt.reward)
		assert.NotEmpty(t, got.Detail, "%s: Score(%q) has no detail", tt.spec, tt.answer)
		name := p.parts[0].name
		assert.Equal(t, map[string]float64{name: tt.reward}, got.Metrics, "%s: Score(%q) metrics", tt.spec, tt.answer)
	}
}

func TestLastNumber(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"6,216", 6216, true},
		{"1,234,567.5 units", 1234567.5, true},
		{"x = -2.5", -2.5, true},
		{"range 3-4", 4, true},
		{"a-3", 3, true},
		{"-3", -3, true},
		{`\boxed{7} then 9`, 7, true},
		{`\boxed{unclosed 5`, 5, true},
		{"none", 0, false},
	}
	for _, tt := range tests {
		got, ok := LastNumber(tt.in)
		assert.Equal(t, tt.ok, ok, "LastNumber(%q) ok", tt.in)
		assert.Equal(t, tt.want, got, "LastNumber(%q) = %v, want %v", tt.in, got, tt.want)
	}
}

func TestDetailIsClipped(t *testing.T) {
	long := make([]byte, 10000)
	for i := range long {
		long[i] = 'x'
	}
	s := Exact{}.Score(tasksets.Task{Answer: "y"}, string(long))
	assert.Less(t, len(s.Detail), 200, "detail of a 10k answer is %d bytes", len(s.Detail))
}
