package rubrics

import (
	"fmt"
	"strings"
)

// ConfigError reports a rubric that cannot score a rollout as the run is
// configured: a tests part for a task without a verifier, a judge part on a
// worker without a judge model. Trying again cannot help; the run should
// fail. Program.Check finds these before the rollout runs.
type ConfigError struct {
	// Part is the name of the part at fault ("tests", "judge", or its label).
	Part string
	// Reason says what is missing, in the words of the spec.
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("rubric %s: %s", e.Part, e.Reason) }

// ScoringError reports a fault of the scoring itself, never of the agent: a
// judge call that fails or a reply without a score. The rollout
// has no reward yet (never read it as 0); trying again may help.
type ScoringError struct {
	// Part is the name of the part that failed ("command", "judge", …).
	Part string
	// Reason is short: "exit status 2", "timed out after 1m0s", "reply has no score".
	Reason string
	// Stderr is the end of a command's standard error, "" otherwise.
	Stderr string
	// Err is the cause, when there is one (the judge's error, the context's).
	Err error
}

// stderrInError is how much of a command's stderr an error message quotes.
const stderrInError = 300

func (e *ScoringError) Error() string {
	var b strings.Builder
	b.WriteString("rubric ")
	b.WriteString(e.Part)
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if tail := strings.Join(strings.Fields(e.Stderr), " "); tail != "" {
		if len(tail) > stderrInError {
			tail = "…" + lastBytes(tail, stderrInError)
		}
		b.WriteString("; stderr: ")
		b.WriteString(tail)
	}
	return b.String()
}

func (e *ScoringError) Unwrap() error { return e.Err }
