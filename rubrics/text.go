package rubrics

import (
	"fmt"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Exact passes when the normalized answer equals the normalized task answer.
type Exact struct{}

// Score implements Rubric.
func (Exact) Score(task tasksets.Task, answer string) Score {
	want := normalize(task.Answer)
	if want == "" {
		return noAnswer
	}
	got := normalize(answer)
	if got == want {
		return binary(true, "exact match")
	}
	return binary(false, fmt.Sprintf("got %q, want %q", clip(got), clip(want)))
}

// Contains passes when the normalized answer contains the normalized task
// answer.
type Contains struct{}

// Score implements Rubric.
func (Contains) Score(task tasksets.Task, answer string) Score {
	want := normalize(task.Answer)
	if want == "" {
		return noAnswer
	}
	if strings.Contains(normalize(answer), want) {
		return binary(true, fmt.Sprintf("contains %q", clip(want)))
	}
	return binary(false, fmt.Sprintf("%q not found in answer", clip(want)))
}

// normalize trims, lowercases, collapses whitespace runs to one space and
// drops trailing periods, so "The answer is 42. " equals "the answer  is 42".
func normalize(s string) string {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	return strings.TrimSpace(strings.TrimRight(s, "."))
}
