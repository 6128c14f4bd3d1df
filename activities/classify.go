package activities

import (
	"fmt"
	"strings"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// classify names why a rollout failed as a task, or returns "". Running out
// of turns, tokens or model time is read from the turn the interception
// server refused for that limit (limit:<which>), never from an exit code:
// harnesses give codes their own meanings (argparse exits 2 on a usage
// error). A trace from before the server enforced limits has none: there,
// maxTurns model calls and then a harness that did not finish normally is
// max_turns. maxTurns 0 is no limit.
func classify(res harness.Result, turns []trace.Turn, maxTurns int) (kind, msg string) {
	for _, t := range turns {
		if t.Limit != "" {
			return rollout.KindLimit + t.Limit, shortErr(t.Error)
		}
	}
	for _, t := range turns {
		if t.Status == 400 && isContextLength(t.Error) {
			return rollout.KindContextLength, shortErr(t.Error)
		}
	}
	switch {
	case res.TimedOut:
		return rollout.KindTimeout, "harness timed out"
	case res.OOMKilled:
		return rollout.KindOOM, "harness killed for using more than its task's memory"
	case res.ExitCode != 0 && maxTurns > 0 && len(turns) >= maxTurns:
		return rollout.KindMaxTurns, fmt.Sprintf("harness stopped after %d model calls, the turn limit", len(turns))
	case res.ExitCode != 0:
		return rollout.KindHarnessExit, fmt.Sprintf("harness exited with code %d: %s", res.ExitCode, shortErr(lastLine(res.Stderr)))
	}
	if len(turns) > 0 && turns[len(turns)-1].Response.Message.Refusal != "" {
		return rollout.KindRefusal, shortErr(turns[len(turns)-1].Response.Message.Refusal)
	}
	return "", ""
}

// upstreamFailure tells an outage from a task failure: the last model call
// was failed by the provider, as the interception server recorded it (a
// connection cut or reset, a timeout, a truncated stream, an answer that is
// not JSON, an error event), or the harness was stopped at its timeout
// while that call still waited on the provider. Whatever the harness did next, its answer was
// not made from a model's answer: a harness that exits 0 after a truncated
// stream has nothing of the agent's to score. A bare 429 or 5xx in a trace
// from before failures were named counts only when the harness failed. It
// returns how, or "".
func upstreamFailure(res harness.Result, turns []trace.Turn) trace.UpstreamFailure {
	if len(turns) == 0 {
		return ""
	}
	last := turns[len(turns)-1]
	if last.UpstreamFailure != "" {
		return last.UpstreamFailure
	}
	if res.ExitCode == 0 && !res.TimedOut {
		return ""
	}
	if res.TimedOut && unanswered(last) {
		// Killed at its timeout while its model call waited on the
		// provider: the provider hung longer than the harness may run.
		return trace.UpstreamTimeout
	}
	if last.Status == 429 || last.Status >= 500 {
		return trace.UpstreamStatus // a trace from before failures were named
	}
	return ""
}

// unanswered reports whether t is a call whose caller went away before any
// byte of the provider's answer arrived, having sent it to the provider
// (a call refused by a limit never reached it).
func unanswered(t trace.Turn) bool {
	return t.Status == statusClientClosed && t.TTFT == 0 && t.Limit == ""
}

// statusClientClosed is the status the interception server records for a
// call whose caller went away before its answer.
const statusClientClosed = 499

func isContextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context_length") || strings.Contains(m, "context length") ||
		strings.Contains(m, "maximum context") || strings.Contains(m, "prompt is too long") ||
		strings.Contains(m, "context window") || strings.Contains(m, "input is too long")
}
