package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The progress query counts what a pull run handed out and ran, and tells
// a trainer its task count and how many epochs bound it.
func TestPullProgressTellsTheTaskCount(t *testing.T) {
	env := newEnv()
	f := newFakeWorker(40, 0)
	f.register(env, 0)
	(&groupRecorder{}).register(env, nil)
	var before, after PullProgress
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&before))
		for i := range 3 {
			env.UpdateWorkflow(UpdateSample, "s"+string(rune('a'+i)), &updateResult{})
		}
		env.UpdateWorkflow(UpdateRunGroup, "g", &updateResult{}, RunGroupInput{Position: 0, N: 2})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryProgress)
		require.NoError(t, err)
		require.NoError(t, v.Get(&after))
		env.UpdateWorkflow(UpdateClose, "close", &updateResult{})
	}, time.Minute)
	env.ExecuteWorkflow(Pull, PullInput{Config: testConfig(10, 1, 4), Train: TrainConfig{Epochs: 3}})

	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, PullProgress{RunID: "run-1", Tasks: 10, TasksetLen: 40, Epochs: 3}, before)
	require.Equal(t, PullProgress{RunID: "run-1", Sampled: 3, Groups: 1, Tasks: 10, TasksetLen: 40, Epochs: 3}, after)
	var final PullProgress
	require.NoError(t, env.GetWorkflowResult(&final))
	require.True(t, final.Closed, "the run's result says it was closed")
	require.Equal(t, int64(3), final.Sampled)
}
