// Package rubrics scores a finished rollout. A run names its rubric by a spec
// such as "numeric:0.01", "tests" or "tests*0.8 + judge*0.2"; Compile turns
// the spec into a Program, which scores each rollout from an Input the
// activity fills: the task, the final answer, the agent's workspace, the
// verifier's verdict, the conversation and a judge model.
package rubrics

import (
	"strings"
	"unicode/utf8"

	"github.com/evalflow/evalflow/tasksets"
)

// Score is a rubric's verdict on one rollout.
type Score struct {
	// Reward is the rollout's reward: in [0, 1] for the text and judge
	// rubrics; a verifier's or a command's reward as it gave it.
	Reward float64
	// Metrics are the named numbers behind Reward. A Program reports one per
	// part under the part's name ("tests", "judge") and a part's own numbers
	// under "<name>.<metric>" ("tests.passed"); a Rubric reports none.
	Metrics map[string]float64
	// Detail says briefly why, for the run's results.
	Detail string
}

// Rubric scores an answer alone against the task's reference answer: the
// text rubrics Exact, Numeric, Contains and Regex. A Program combines them
// with verifiers, commands and judges.
type Rubric interface {
	Score(task tasksets.Task, answer string) Score
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
	return s[:runeStart(s, limit)] + "…"
}

// clipMiddle shortens s to about limit bytes, keeping its start and its end
// (where a judge usually writes its score), on one line.
func clipMiddle(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= limit {
		return s
	}
	return s[:runeStart(s, limit/2)] + " … " + lastBytes(s, limit/2)
}

// lastBytes is the end of s, at most n bytes, starting at a rune.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// runeStart is the largest i <= n at which a rune of s starts.
func runeStart(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
