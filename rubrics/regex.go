package rubrics

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Regex passes when the trimmed answer matches Pattern, or, when Pattern is
// nil, the task's answer compiled as a pattern. Matching is unanchored; write
// ^...$ to match the whole answer and (?i) to ignore case.
type Regex struct {
	Pattern *regexp.Regexp
}

// Score implements Rubric.
func (r Regex) Score(task tasksets.Task, answer string) Score {
	re := r.Pattern
	if re == nil {
		if task.Answer == "" {
			return noAnswer
		}
		var err error
		if re, err = regexp.Compile(task.Answer); err != nil {
			return Score{Detail: fmt.Sprintf("task answer is not a valid pattern: %v", err)}
		}
	}
	if re.MatchString(strings.TrimSpace(answer)) {
		return binary(true, fmt.Sprintf("matches %s", clip(re.String())))
	}
	return binary(false, fmt.Sprintf("does not match %s", clip(re.String())))
}
