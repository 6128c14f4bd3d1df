// Package rubrics scores a harness's final answer against a task's reference
// answer. A rubric is chosen per run by a spec string such as "numeric:0.01".
package rubrics

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/evalflow/evalflow/tasksets"
)

// Score is a rubric's verdict on one answer.
type Score struct {
	// Reward is in [0, 1].
	Reward float64
	// Detail says briefly why, for the run's results.
	Detail string
}

// Rubric scores an answer to a task.
type Rubric interface {
	Score(task tasksets.Task, answer string) Score
}

// specHelp lists the specs Parse accepts.
const specHelp = "exact, numeric, numeric:TOLERANCE, contains, regex, regex:PATTERN, rank:SPEC"

// Parse builds a rubric from its spec:
//
//	exact           normalized answer equals the task's answer
//	numeric[:TOL]   last number in the answer is within TOL of the task's (default 0)
//	contains        normalized answer contains the task's answer
//	regex[:PATTERN] answer matches PATTERN, or the task's answer as a pattern
//	rank:SPEC       SPEC per rollout; a group of rollouts is rewarded by rank
func Parse(spec string) (Rubric, error) {
	if r, ok, err := parseGroup(spec); ok {
		return r, err
	}
	name, arg, hasArg := strings.Cut(strings.TrimSpace(spec), ":")
	switch {
	case name == "exact" && !hasArg:
		return Exact{}, nil
	case name == "contains" && !hasArg:
		return Contains{}, nil
	case name == "numeric" && !hasArg:
		return Numeric{}, nil
	case name == "numeric":
		tol, err := strconv.ParseFloat(arg, 64)
		if err != nil || tol < 0 || math.IsNaN(tol) {
			return nil, fmt.Errorf("rubric %q: tolerance %q is not a non-negative number", spec, arg)
		}
		return Numeric{Tolerance: tol}, nil
	case name == "regex" && !hasArg:
		return Regex{}, nil
	case name == "regex":
		re, err := regexp.Compile(arg)
		if err != nil {
			return nil, fmt.Errorf("rubric %q: %w", spec, err)
		}
		return Regex{Pattern: re}, nil
	}
	return nil, fmt.Errorf("unknown rubric %q (valid: %s)", spec, specHelp)
}

// noAnswer is the score for a task that carries no reference answer.
var noAnswer = Score{Reward: 0, Detail: "task has no reference answer"}

// binary turns a pass/fail into a Score.
func binary(pass bool, detail string) Score {
	if pass {
		return Score{Reward: 1, Detail: detail}
	}
	return Score{Reward: 0, Detail: detail}
}

// clip shortens s for a Detail, so a rambling answer cannot bloat results.
func clip(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
