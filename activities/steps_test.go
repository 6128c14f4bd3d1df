package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/rollout"
)

// stepTask is a three-step Harbor task in a directory of its own: each
// step asks for a file, its tests check that file and what the earlier
// steps left, and the second step must score 1 for the third to run.
func stepTask(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	check := func(files ...string) string {
		s := "logs=\"${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}\"\nws=\"${EVALFLOW_WORKSPACE:-/app}\"\nok=1\n"
		for _, f := range files {
			s += "[ -f \"$ws/" + f + "\" ] || ok=0\n"
		}
		return s + "echo $ok > \"$logs/reward.txt\"\n"
	}
	files := map[string]string{
		"three/task.toml": `schema_version = "1.1"
[[steps]]
name = "one"
[[steps]]
name = "two"
min_reward = 1.0
[[steps]]
name = "three"
`,
		"three/tests/test.sh":                 check("one"),
		"three/steps/one/instruction.md":      "Write the file one.\n",
		"three/steps/one/solution/solve.sh":   "touch \"${EVALFLOW_WORKSPACE:-/app}/one\"\n",
		"three/steps/two/instruction.md":      "Write the file two.\n",
		"three/steps/two/tests/test.sh":       check("one", "two"),
		"three/steps/two/solution/solve.sh":   "touch \"${EVALFLOW_WORKSPACE:-/app}/two\"\n",
		"three/steps/three/instruction.md":    "Write the file three.\n",
		"three/steps/three/tests/test.sh":     check("one", "two", "three"),
		"three/steps/three/solution/solve.sh": "touch \"${EVALFLOW_WORKSPACE:-/app}/three\"\n",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	return root
}

func stepRef(taskset string, h rollout.HarnessConfig) rollout.Ref {
	h.Timeout = time.Minute
	return rollout.Ref{RunID: "run", Taskset: taskset, Model: "mock", Rubric: "exact", Harness: h, Attempt: 1}
}

// The oracle runs each step's solution in the one workspace: every step
// scores 1, and so does the rollout; the record and the trace hold each
// step's verdict.
func TestMultiStepTaskScoresEachStepInOneWorkspace(t *testing.T) {
	r, _ := verifiedRig(t)
	ref := stepRef(stepTask(t), rollout.HarnessConfig{Oracle: true})
	s, err := r.rollout(t, ref)
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Equal(t, 1.0, s.Reward)

	rec, found, err := r.store.Get(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, map[string]float64{"tests": 1, "step.one": 1, "step.two": 1, "step.three": 1}, rec.Metrics)
	tr, err := r.store.Trace(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.Len(t, tr.Steps, 3)
	for i, name := range []string{"one", "two", "three"} {
		assert.Equal(t, name, tr.Steps[i].Name)
		assert.Equal(t, 1.0, tr.Steps[i].Verifier.Reward)
		assert.False(t, tr.Steps[i].Stopped)
	}
}

// A harness that does nothing scores 0 at the second step, below its
// min_reward: the third never runs, and the rollout's reward is the mean
// of the two that did, as Harbor takes it.
func TestMultiStepTaskStopsBelowMinReward(t *testing.T) {
	r, _ := verifiedRig(t)
	ref := stepRef(stepTask(t), rollout.HarnessConfig{Command: []string{"true"}})
	s, err := r.rollout(t, ref)
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status, "an agent that did nothing is scored, not failed")
	assert.Equal(t, 0.0, s.Reward)

	tr, err := r.store.Trace(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.Len(t, tr.Steps, 2, "the third step never ran")
	assert.Equal(t, []string{"one", "two"}, []string{tr.Steps[0].Name, tr.Steps[1].Name})
	assert.False(t, tr.Steps[0].Stopped)
	assert.True(t, tr.Steps[1].Stopped)
	rec, found, err := r.store.Get(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.True(t, found)
	assert.NotContains(t, rec.Metrics, "step.three")
}

// An attempt that fails between steps (here the second step's verifier
// writes no reward the first time) is the infrastructure's: its trace is
// kept, and the next attempt runs the rollout again from its first step,
// in a fresh workspace, as it does on another worker when this one dies.
func TestMultiStepAttemptRunsAgainFromItsFirstStep(t *testing.T) {
	r, _ := verifiedRig(t)
	root := stepTask(t)
	mark, agentLog := filepath.Join(t.TempDir(), "failed-once"), filepath.Join(t.TempDir(), "agent.log")
	flaky := "[ -e \"$MARK\" ] || { touch \"$MARK\"; exit 1; }\n"
	test2, err := os.ReadFile(filepath.Join(root, "three/steps/two/tests/test.sh"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "three/steps/two/tests/test.sh"), append([]byte(flaky), test2...), 0o644))
	toml, err := os.ReadFile(filepath.Join(root, "three/task.toml"))
	require.NoError(t, err)
	toml = append([]byte("[verifier.env]\nMARK = \""+mark+"\"\n"), toml...)
	require.NoError(t, os.WriteFile(filepath.Join(root, "three/task.toml"), toml, 0o644))
	// The agent writes the file its step names, and logs the step.
	agent := `f=$(echo "$EVALFLOW_PROMPT" | cut -d' ' -f4 | tr -d .); touch "$EVALFLOW_WORKSPACE/$f"; echo "$f" >> "` + agentLog + `"`

	ref := stepRef(root, rollout.HarnessConfig{Command: []string{"sh", "-c", agent}})
	_, err = r.rollout(t, ref)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the verifier of step two")
	ref.Attempt = 2
	s, err := r.rollout(t, ref)
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Reward)

	logged, err := os.ReadFile(agentLog)
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\none\ntwo\nthree\n", string(logged), "the second attempt began at the first step")
	attempts, err := r.store.Attempts(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.Len(t, attempts, 2, "the failed attempt's trace is kept beside the record's")
	assert.Len(t, attempts[0].Rollout.Steps, 2)
	assert.NotEmpty(t, attempts[0].Rollout.Steps[1].Verifier.Error)
}

// What of a task's definition evalflow does not carry out (a disk limit
// here) is listed in every rollout's trace, never passed over in silence.
func TestTaskWarningsAreInTheTrace(t *testing.T) {
	r, _ := verifiedRig(t)
	root := stepTask(t)
	toml, err := os.ReadFile(filepath.Join(root, "three/task.toml"))
	require.NoError(t, err)
	toml = append(toml, "\n[environment]\nstorage_mb = 10240\n"...)
	require.NoError(t, os.WriteFile(filepath.Join(root, "three/task.toml"), toml, 0o644))
	ref := stepRef(root, rollout.HarnessConfig{Oracle: true})
	_, err = r.rollout(t, ref)
	require.NoError(t, err)
	tr, err := r.store.Trace(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.NotEmpty(t, tr.Workspace)
	assert.Contains(t, tr.Workspace[len(tr.Workspace)-1], "storage_mb is not honoured")
}

// A step's verifier sees the task's tests with the step's over them: a
// helper only the task has, one in a directory only the step has, and the
// step's test.sh in place of the task's.
func TestStepTestsLayerOverTheTasks(t *testing.T) {
	r, _ := verifiedRig(t)
	root := stepTask(t)
	files := map[string]string{
		"three/tests/common/ok.sh":         "ok=1\n",
		"three/steps/two/tests/lib/two.sh": "[ -f \"$ws/two\" ] || ok=0\n",
		"three/steps/two/tests/test.sh":    "logs=\"${EVALFLOW_VERIFIER_LOGS:-/logs/verifier}\"\nws=\"${EVALFLOW_WORKSPACE:-/app}\"\ntests=\"${EVALFLOW_TESTS:-/tests}\"\n. \"$tests/common/ok.sh\"\n. \"$tests/lib/two.sh\"\necho $ok > \"$logs/reward.txt\"\n",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	ref := stepRef(root, rollout.HarnessConfig{Oracle: true})
	s, err := r.rollout(t, ref)
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Reward)
	tr, err := r.store.Trace(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	require.Len(t, tr.Steps, 3)
	assert.Equal(t, 1.0, tr.Steps[1].Verifier.Reward, "step two's test.sh found the task's helper and its own: %s", tr.Steps[1].Verifier.Stderr)
}
