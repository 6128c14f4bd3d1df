package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

func TestClassify(t *testing.T) {
	ok := trace.Turn{Status: 200}
	for _, tc := range []struct {
		name     string
		res      harness.Result
		turns    []trace.Turn
		maxTurns int
		want     string
	}{
		{"success", harness.Result{}, []trace.Turn{ok}, 8, ""},
		{"no model call", harness.Result{}, nil, 8, ""},
		{"harness exit", harness.Result{ExitCode: 1, Stderr: "boom\nlast line"}, []trace.Turn{ok}, 8, rollout.KindHarnessExit},
		{"turn limit", harness.Result{ExitCode: 2}, []trace.Turn{ok, ok}, 2, rollout.KindMaxTurns},
		{"timeout", harness.Result{ExitCode: -1, TimedOut: true}, nil, 8, rollout.KindTimeout},
		{"over its memory", harness.Result{ExitCode: 137, OOMKilled: true}, nil, 8, rollout.KindOOM},
		{"killed, not for memory", harness.Result{ExitCode: 137, Stderr: "Killed\nlast line"}, nil, 8, rollout.KindHarnessExit},
		{"context length", harness.Result{ExitCode: 1}, []trace.Turn{{Status: 400, Error: "This model's maximum context length is 8192 tokens"}}, 8, rollout.KindContextLength},
		{"refusal", harness.Result{}, []trace.Turn{{Status: 200, Response: dialects.Response{Message: dialects.Message{Refusal: "I can't help with that."}}}}, 8, rollout.KindRefusal},
	} {
		kind, msg := classify(tc.res, tc.turns, tc.maxTurns)
		assert.Equal(t, tc.want, kind, "%s: classify = %q (%s)", tc.name, kind, msg)
		if tc.want == rollout.KindHarnessExit {
			assert.Contains(t, msg, "last line", "the error names the harness's last words")
		}
	}
}

// Running out of turns is what the interception server saw, not an exit
// code: Python's argparse exits 2 on a usage error, and a broken harness is
// not an agent that ran out of turns.
func TestClassifyTurnLimitFromTurnsNotExitCode(t *testing.T) {
	ok := trace.Turn{Status: 200}
	for _, tc := range []struct {
		name     string
		res      harness.Result
		turns    []trace.Turn
		maxTurns int
		want     string
	}{
		{"argparse usage error", harness.Result{ExitCode: 2, Stderr: "usage: agent.py [-h] --task TASK\nagent.py: error: the following arguments are required: --task"}, nil, 8, rollout.KindHarnessExit},
		{"exit 2 before the limit", harness.Result{ExitCode: 2}, []trace.Turn{ok, ok, ok}, 8, rollout.KindHarnessExit},
		{"limit reached, any exit code", harness.Result{ExitCode: 1}, []trace.Turn{ok, ok, ok}, 3, rollout.KindMaxTurns},
		{"a harness stopped at the limit, exit 2", harness.Result{ExitCode: 2}, []trace.Turn{ok, ok, ok}, 3, rollout.KindMaxTurns},
		{"answered on the last turn", harness.Result{}, []trace.Turn{ok, ok, ok}, 3, ""},
		{"no limit", harness.Result{ExitCode: 2}, []trace.Turn{ok, ok, ok}, 0, rollout.KindHarnessExit},
		{"timed out at the limit", harness.Result{ExitCode: -1, TimedOut: true}, []trace.Turn{ok, ok, ok}, 3, rollout.KindTimeout},
	} {
		kind, msg := classify(tc.res, tc.turns, tc.maxTurns)
		assert.Equal(t, tc.want, kind, "%s: classify = %q (%s)", tc.name, kind, msg)
	}
	_, msg := classify(harness.Result{ExitCode: 2, Stderr: "usage: agent.py\nagent.py: error: the following arguments are required: --task"}, nil, 8)
	assert.Contains(t, msg, "code 2")
	assert.Contains(t, msg, "arguments are required", "the usage error is what the record says")
}

// A call the interception server refused for a limit names the limit,
// whatever the harness did next (gave up with any code, or answered
// anyway), and before a timeout or the older turn count.
func TestClassifyEnforcedLimit(t *testing.T) {
	ok := trace.Turn{Status: 200}
	refused := func(which string) trace.Turn {
		return trace.Turn{Status: 400, Limit: which, Error: "rollout limit reached: " + which}
	}
	for _, tc := range []struct {
		name  string
		res   harness.Result
		turns []trace.Turn
		want  string
	}{
		{"turns, harness failed", harness.Result{ExitCode: 1}, []trace.Turn{ok, ok, refused(trace.LimitTurns)}, "limit:turns"},
		{"turns, harness exited 0", harness.Result{}, []trace.Turn{ok, ok, refused(trace.LimitTurns)}, "limit:turns"},
		{"tokens", harness.Result{ExitCode: 1}, []trace.Turn{ok, refused(trace.LimitTokens)}, "limit:tokens"},
		{"model time, then timed out", harness.Result{ExitCode: -1, TimedOut: true}, []trace.Turn{ok, refused(trace.LimitModelTime)}, "limit:model_time"},
	} {
		kind, msg := classify(tc.res, tc.turns, 2)
		assert.Equal(t, tc.want, kind, "%s: classify = %q (%s)", tc.name, kind, msg)
		assert.Contains(t, msg, "rollout limit reached", tc.name)
	}
	var none harness.Result
	assert.Empty(t, upstreamFailure(none, []trace.Turn{ok, refused(trace.LimitTurns)}), "a limit is no upstream failure")
}

func TestUpstreamFailureIsInfrastructure(t *testing.T) {
	exit1 := harness.Result{ExitCode: 1}
	timedOut := harness.Result{ExitCode: -1, TimedOut: true}
	for _, tc := range []struct {
		name string
		res  harness.Result
		turn trace.Turn
		want trace.UpstreamFailure
	}{
		{"503", exit1, trace.Turn{Status: 503}, trace.UpstreamStatus},
		{"429", exit1, trace.Turn{Status: 429}, trace.UpstreamStatus},
		{"502", exit1, trace.Turn{Status: 502}, trace.UpstreamStatus},
		{"400", exit1, trace.Turn{Status: 400}, ""},
		{"the harness coped", harness.Result{}, trace.Turn{Status: 503}, ""},
		{"cut mid-body, relayed as 200", exit1, trace.Turn{Status: 200, UpstreamFailure: trace.UpstreamConnection}, trace.UpstreamConnection},
		{"truncated stream", exit1, trace.Turn{Status: 200, UpstreamFailure: trace.UpstreamTruncated}, trace.UpstreamTruncated},
		{"invalid JSON in a 200", exit1, trace.Turn{Status: 200, UpstreamFailure: trace.UpstreamBadAnswer}, trace.UpstreamBadAnswer},
		{"hung provider, then the harness timed out", timedOut, trace.Turn{Status: 504, UpstreamFailure: trace.UpstreamTimeout}, trace.UpstreamTimeout},
		{"a timeout after a good answer", timedOut, trace.Turn{Status: 200}, ""},
		{"stopped at its timeout, its call waiting on the provider", timedOut, trace.Turn{Status: 499, Attempts: 1}, trace.UpstreamTimeout},
		{"stopped at its timeout, its call never answered", timedOut, trace.Turn{Status: 499, Error: "no answer from the model provider when the harness ended"}, trace.UpstreamTimeout},
		{"stopped at its timeout, reading an answer", timedOut, trace.Turn{Status: 499, TTFT: 1}, ""},
		{"exited 0 leaving a call unanswered", harness.Result{}, trace.Turn{Status: 499}, ""},
		{"exited 1 leaving a call unanswered", exit1, trace.Turn{Status: 499}, ""},
		{"an answer made after a truncated stream", harness.Result{}, trace.Turn{Status: 200, UpstreamFailure: trace.UpstreamTruncated}, trace.UpstreamTruncated},
		{"an answer made after an error event", harness.Result{}, trace.Turn{Status: 200, UpstreamFailure: trace.UpstreamErrorEvent}, trace.UpstreamErrorEvent},
	} {
		got := upstreamFailure(tc.res, []trace.Turn{tc.turn})
		assert.Equal(t, tc.want, got, "%s: upstreamFailure = %q", tc.name, got)
	}
	assert.Empty(t, upstreamFailure(exit1, nil))
}

// A harness stopped at its timeout while its model call waited on the
// provider is the provider's failure; one stopped while the agent worked on
// an answer it had is the agent's timeout.
func TestHarnessTimeoutWaitingOnTheProvider(t *testing.T) {
	timedOut := harness.Result{ExitCode: -1, TimedOut: true}
	ok := trace.Turn{Status: 200}
	waiting := trace.Turn{Status: 499, Attempts: 1}

	assert.Equal(t, trace.UpstreamTimeout, upstreamFailure(timedOut, []trace.Turn{ok, waiting}), "the last call waited on the provider")
	assert.Empty(t, upstreamFailure(timedOut, []trace.Turn{waiting, ok}), "the provider answered the last call: the agent was working")
	kind, _ := classify(timedOut, []trace.Turn{waiting, ok}, 8)
	assert.Equal(t, rollout.KindTimeout, kind, "the agent's own timeout")
}
