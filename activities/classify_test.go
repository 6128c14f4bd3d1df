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
		name  string
		res   harness.Result
		turns []trace.Turn
		want  string
	}{
		{"success", harness.Result{}, []trace.Turn{ok}, ""},
		{"no model call", harness.Result{}, nil, ""},
		{"harness exit", harness.Result{ExitCode: 1, Stderr: "boom\nlast line"}, []trace.Turn{ok}, rollout.KindHarnessExit},
		{"turn limit", harness.Result{ExitCode: 2}, []trace.Turn{ok, ok}, rollout.KindMaxTurns},
		{"timeout", harness.Result{ExitCode: -1, TimedOut: true}, nil, rollout.KindTimeout},
		{"context length", harness.Result{ExitCode: 1}, []trace.Turn{{Status: 400, Error: "This model's maximum context length is 8192 tokens"}}, rollout.KindContextLength},
		{"refusal", harness.Result{}, []trace.Turn{{Status: 200, Response: dialects.Response{Message: dialects.Message{Refusal: "I can't help with that."}}}}, rollout.KindRefusal},
	} {
		kind, msg := classify(tc.res, tc.turns)
		assert.Equal(t, tc.want, kind, "%s: classify = %q (%s)", tc.name, kind, msg)
		if tc.want == rollout.KindHarnessExit {
			assert.Contains(t, msg, "last line", "the error names the harness's last words")
		}
	}
}

func TestUpstreamFailureIsInfrastructure(t *testing.T) {
	for _, tc := range []struct {
		res    harness.Result
		status int
		want   bool
	}{
		{harness.Result{ExitCode: 1}, 503, true},
		{harness.Result{ExitCode: 1}, 429, true},
		{harness.Result{ExitCode: 1}, 502, true},
		{harness.Result{ExitCode: 1}, 400, false},
		{harness.Result{ExitCode: 0}, 503, false}, // the harness coped
	} {
		got := upstreamFailed(tc.res, []trace.Turn{{Status: tc.status}})
		assert.Equal(t, tc.want, got, "upstreamFailed(exit %d, status %d)", tc.res.ExitCode, tc.status)
	}
	assert.False(t, upstreamFailed(harness.Result{ExitCode: 1}, nil))
}
