package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
)

// needsJQ is the rollout of a one-task JSONL taskset whose environment's
// Dockerfile installs a package: line 3 is RUN.
func needsJQ(t *testing.T) rollout.Ref {
	t.Helper()
	dir := t.TempDir()
	env := filepath.Join(dir, "env")
	require.NoError(t, os.MkdirAll(env, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(env, "Dockerfile"),
		[]byte("FROM debian:bookworm-slim\nWORKDIR /app\nRUN apt-get install -y jq\nCOPY data.json ./\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(env, "data.json"), []byte(`{"n": 42}`), 0o644))
	tasks := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, os.WriteFile(tasks,
		[]byte(`{"id": "needs-jq", "prompt": "Print n from data.json with jq.", "answer": "42", "environment": "env"}`+"\n"), 0o644))
	return rollout.Ref{
		RunID: "run", Taskset: tasks, Model: "mock", Rubric: "exact",
		Harness: rollout.HarnessConfig{Command: []string{"fake-harness"}, Timeout: time.Minute}, Attempt: 1,
	}
}

// A task whose Dockerfile has a RUN line fails its run under the local
// runtime, as configured wrongly and not retried: the message names the
// task and the line, and nothing runs or is left behind.
func TestRunRefusesAnEnvironmentTheRuntimeCannotReproduce(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := needsJQ(t)
	_, err := r.rollout(t, ref)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable(), "every attempt would meet the same line")
	assert.Contains(t, err.Error(), "task needs-jq: Dockerfile line 3: RUN apt-get install -y jq")
	assert.Contains(t, err.Error(), "--runtime.skip-unsupported")
	assert.Empty(t, workspaces(t, workDir), "the refused workspace is removed")
	assert.True(t, capacityFree(r.acts.Capacity), "the worker's capacity is given back")
}

// With SkipUnsupported the same task runs: the RUN line is skipped and
// noted in the rollout's trace.
func TestRunSkipsUnsupportedLinesWhenAsked(t *testing.T) {
	var notes []string
	r := newRig(t, func(_ context.Context, spec harness.Spec) (harness.Result, error) {
		notes = spec.Workspace.Notes
		return harness.Result{Answer: "42"}, nil
	})
	r.acts.WorkDir = t.TempDir()
	r.acts.SkipUnsupported = true
	s, err := r.rollout(t, needsJQ(t))
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Contains(t, notes, "RUN apt-get install -y jq: not run outside docker")
	tr, err := r.store.Trace(context.Background(), "run", s.Key)
	require.NoError(t, err)
	assert.Contains(t, tr.Workspace, "RUN apt-get install -y jq: not run outside docker")
}

// imageRuntime stands for the container runtime: it prepares its own
// workspaces (a sandbox of the task's image, whose build carries out the
// Dockerfile).
type imageRuntime struct {
	fakeRuntime
	prepared *int
}

func (r imageRuntime) PrepareWorkspace(parent string, task tasksets.Task) (*harness.Workspace, error) {
	*r.prepared++
	return harness.NewSandboxWorkspace(parent, task)
}

// A runtime that prepares its own workspaces is asked to, and is not
// refused the RUN lines its image build carries out.
func TestRunLeavesTheDockerfileToARuntimeThatBuildsIt(t *testing.T) {
	r := newRig(t, nil)
	prepared := 0
	r.acts.Runtime = imageRuntime{fakeRuntime: func(_ context.Context, spec harness.Spec) (harness.Result, error) {
		if spec.Workspace == nil || spec.Workspace.BuildContext() == "" {
			return harness.Result{ExitCode: 1}, nil
		}
		return harness.Result{Answer: "42"}, nil
	}, prepared: &prepared}
	r.acts.WorkDir = t.TempDir()
	s, err := r.rollout(t, needsJQ(t))
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, s.Status)
	assert.Equal(t, 1, prepared, "the runtime prepared the workspace")
}

// harborAppRef is the rollout of a Harbor task whose solution and tests use
// /app and /logs, as Harbor tasks are written, run by the oracle.
func harborAppRef() rollout.Ref {
	return rollout.Ref{
		RunID: "run", Taskset: "harbor:../internal/harness/hostpaths/testdata/harbor-app", Model: "mock", Rubric: "exact",
		Harness: rollout.HarnessConfig{Oracle: true, Timeout: time.Minute}, Attempt: 1,
	}
}

// A run's start refuses a task its worker's runtime cannot honour: under
// the local runtime, a Harbor task that writes /app fails the run at
// DescribeTaskset, as configured wrongly, the task named with the runtimes
// that honour it; a taskset written for every runtime starts.
func TestDescribeTasksetRefusesATaskTheRuntimeCannotHonour(t *testing.T) {
	r, _ := verifiedRig(t)
	_, err := r.env.ExecuteActivity(r.acts.DescribeTaskset, rollout.DescribeTasksetInput{Taskset: harborAppRef().Taskset})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	for _, want := range []string{"task hello-app assumes the paths of a sandbox", "solution/solve.sh", "/app", "the local runtime", "--runtime bwrap"} {
		assert.Contains(t, err.Error(), want)
	}

	val, err := r.env.ExecuteActivity(r.acts.DescribeTaskset, rollout.DescribeTasksetInput{Taskset: tasksets.HarborSampleName})
	require.NoError(t, err, "the bundled tasks run locally")
	var desc rollout.DescribeTasksetResult
	require.NoError(t, val.Get(&desc))
	assert.Equal(t, int64(8), desc.Len)

	r.acts.Runtime = &local.Bwrap{Local: local.Runtime{Dir: t.TempDir()}}
	_, err = r.env.ExecuteActivity(r.acts.DescribeTaskset, rollout.DescribeTasksetInput{Taskset: harborAppRef().Taskset})
	require.NoError(t, err, "bwrap gives the task its /app")
}

// A worker whose runtime cannot honour a task refuses its rollout as a
// configuration error, never scored as the agent's: nothing stored, the
// worker's capacity given back.
func TestRunRefusesATaskTheRuntimeCannotHonour(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := harborAppRef()
	_, err := r.rollout(t, ref)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type(), "%v", err)
	assert.Contains(t, err.Error(), "task hello-app assumes the paths of a sandbox")
	_, scored, err := r.store.Get(context.Background(), "run", ref.Key())
	require.NoError(t, err)
	assert.False(t, scored, "not the agent's: nothing scored")
	assert.Empty(t, workspaces(t, workDir))
	assert.True(t, capacityFree(r.acts.Capacity))
}
