package arith

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGenerateDeterministic(t *testing.T) {
	for i := range uint64(50) {
		e1, a1 := Generate(7, i)
		e2, a2 := Generate(7, i)
		assert.Equal(t, e1, e2, "Generate(7, %d) expression differs between calls", i)
		assert.Equal(t, a1, a2, "Generate(7, %d) answer differs between calls", i)
	}
}

func TestGenerateSeedsDiffer(t *testing.T) {
	same := 0
	for i := range uint64(50) {
		e1, _ := Generate(1, i)
		e2, _ := Generate(2, i)
		if e1 == e2 {
			same++
		}
	}
	assert.Less(t, same, 10, "seeds 1 and 2 produced %d/50 identical expressions", same)
}

func TestGenerateIndexesDiffer(t *testing.T) {
	seen := map[string]bool{}
	for i := range uint64(200) {
		e, _ := Generate(0, i)
		seen[e] = true
	}
	assert.Greater(t, len(seen), 150, "200 indexes gave only %d distinct expressions", len(seen))
}

func TestGenerateAnswersMatchEval(t *testing.T) {
	for i := range uint64(2000) {
		expr, answer := Generate(42, i)
		v, err := Eval(expr)
		require.NoError(t, err, "Eval(Generate(42, %d) = %q)", i, expr)
		assert.Equal(t, Format(v), answer, "Generate(42, %d) = %q, %q", i, expr, answer)
		assert.NotContains(t, answer, ".", "Generate(42, %d) = %q has a non-integer answer %q", i, expr, answer)
		found, ok := Find("What is " + expr + "?")
		assert.True(t, ok && found == expr, "Find cannot recover %q, got %q", expr, found)
	}
}

// TestGenerateGolden pins the generator's output: a change here silently
// changes every generated taskset, which breaks resumed runs.
func TestGenerateGolden(t *testing.T) {
	var got []string
	for i := range uint64(4) {
		e, a := Generate(7, i)
		got = append(got, e+" = "+a)
	}
	want := []string{"11 + 45 - 72 = -16", "7 - (33 * 13 + 56) = -478", "62 + 78 = 140", "56 / 4 = 14"}
	assert.Equal(t, want, got, "Generate(7, 0..3)")
}
