package rollout_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/rollout"
)

func TestKey(t *testing.T) {
	ref := rollout.Ref{RunID: "run-1", Epoch: 2, Index: 17, K: 3}
	assert.Equal(t, "run-1/2/17/3", ref.Key())
	assert.Equal(t, ref.Key(), rollout.Key("run-1", 2, 17, 3))
}

func TestActivityNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range rollout.Activities {
		assert.False(t, seen[a.Name], "activity %s listed twice", a.Name)
		seen[a.Name] = true
	}
}

// A task's own agent timeout applies up to the run's, which bounds the Run
// activity; a run that set --harness-timeout overrides it.
func TestAgentTimeout(t *testing.T) {
	run := rollout.HarnessConfig{Timeout: 10 * time.Minute}
	assert.Equal(t, 10*time.Minute, run.AgentTimeout(0), "a task without a limit")
	assert.Equal(t, 2*time.Minute, run.AgentTimeout(2*time.Minute), "the task's own, shorter limit")
	assert.Equal(t, 10*time.Minute, run.AgentTimeout(30*time.Minute), "never past the Run activity's bound")
	run.TimeoutGiven = true
	assert.Equal(t, 10*time.Minute, run.AgentTimeout(2*time.Minute), "--harness-timeout overrides the task")
}
