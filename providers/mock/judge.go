package mock

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The headings of a judge prompt, as the default template of evalflow's
// judge rubrics writes them: a last user message holding the answer's
// heading is graded, not answered.
const (
	judgeReference = "## Reference answer"
	judgeAnswer    = "## The assistant's final answer"
)

// grade answers a judge prompt deterministically: 10/10 when the answer
// agrees with the reference answer (it contains it, or its last number
// equals the reference's number), 0/10 when it does not, 5/10 without a
// reference to compare with. ok is false for a prompt that is no judge's.
func grade(prompt string) (r reply, ok bool) {
	ai := strings.Index(prompt, judgeAnswer)
	if ai < 0 {
		return reply{}, false
	}
	answer := section(prompt[ai+len(judgeAnswer):])
	ri := strings.Index(prompt[:ai], judgeReference)
	if ri < 0 {
		return reply{content: "There is no reference answer to compare with.\nScore: 5/10"}, true
	}
	reference := section(prompt[ri+len(judgeReference) : ai])
	if agree(answer, reference) {
		return reply{content: "The answer agrees with the reference answer.\nScore: 10/10"}, true
	}
	return reply{content: "The answer does not agree with the reference answer.\nScore: 0/10"}, true
}

// section is a heading's text: up to the next heading or the grading
// instructions.
func section(s string) string {
	for _, end := range []string{"\n## ", "\nGrade "} {
		if i := strings.Index(s, end); i >= 0 {
			s = s[:i]
		}
	}
	return strings.TrimSpace(s)
}

// agree reports whether answer agrees with reference.
func agree(answer, reference string) bool {
	a, ref := normalize(answer), normalize(reference)
	if ref == "" || a == "(no answer)" {
		return false
	}
	if strings.Contains(a, ref) {
		return true
	}
	want, err := strconv.ParseFloat(strings.ReplaceAll(ref, ",", ""), 64)
	if err != nil {
		return false
	}
	nums := judgeNumber.FindAllString(strings.ReplaceAll(a, ",", ""), -1)
	if len(nums) == 0 {
		return false
	}
	got, err := strconv.ParseFloat(nums[len(nums)-1], 64)
	return err == nil && math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

var judgeNumber = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

// normalize lowercases s, collapses its spaces and drops its final period.
func normalize(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Join(strings.Fields(s), " ")), ".")
}
