package activities_test

import (
	"context"
	"errors"
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

// A task whose Dockerfile has a RUN line is refused under the local
// runtime, as configured wrongly and not retried: its rollout is recorded
// as a configuration error (not the agent's, never scored) naming the
// task and the line, the run goes on, and nothing runs or is left behind.
// A resumed run tries it again, as its Dockerfile may have been fixed.
func TestRunRefusesAnEnvironmentTheRuntimeCannotReproduce(t *testing.T) {
	r, workDir := verifiedRig(t)
	ref := needsJQ(t)
	s, err := r.rollout(t, ref)
	require.NoError(t, err, "the task is refused, not the run")
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindConfig, s.ErrorKind)
	assert.Zero(t, s.Reward)
	assert.Contains(t, s.Error, "task needs-jq: Dockerfile line 3: RUN apt-get install -y jq")
	assert.Contains(t, s.Error, "--runtime.skip-unsupported")
	assert.Empty(t, workspaces(t, workDir), "the refused workspace is removed")
	assert.True(t, capacityFree(r.acts.Capacity), "the worker's capacity is given back")
	rec, ok, err := r.store.Get(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.True(t, ok, "the rollout's record says why")
	assert.Equal(t, rollout.KindConfig, rec.ErrorKind)

	again, err := r.rollout(t, ref)
	require.NoError(t, err)
	assert.False(t, again.Reused, "a refused task is tried again, not reused")
	assert.True(t, again.Rerun)
	assert.Equal(t, rollout.KindConfig, again.ErrorKind)
}

// A runtime's ConfigError of the task's own (its image does not build)
// refuses that task's rollout and keeps what the runtime had to say in
// its trace; a ConfigError of the run's own still fails the run.
func TestRunRecordsATaskTheRuntimeRefuses(t *testing.T) {
	buildLog := harness.SessionLog{Name: "image-build.log", Content: "STEP 2/2: RUN apt-get install no-such-package-xyz\nE: Unable to locate package no-such-package-xyz\n"}
	var runErr error
	r := newRig(t, func(_ context.Context, spec harness.Spec) (harness.Result, error) {
		return harness.Result{SessionLogs: []harness.SessionLog{buildLog}}, runErr
	})
	runErr = harness.TaskConfigError("broken", errors.New("task broken: the image of environment/Dockerfile does not build: exit status 100; the build's last lines:\n  E: Unable to locate package no-such-package-xyz"))
	s, err := r.rollout(t, ref(1))
	require.NoError(t, err)
	assert.Equal(t, rollout.KindConfig, s.ErrorKind)
	assert.Equal(t, "task broken: the image of environment/Dockerfile does not build: exit status 100; the build's last lines: | E: Unable to locate package no-such-package-xyz", s.Error)
	tr, err := r.store.Trace(context.Background(), "run", s.Key)
	require.NoError(t, err)
	require.Len(t, tr.Harness.SessionLogs, 1)
	assert.Equal(t, buildLog.Content, tr.Harness.SessionLogs[0].Content, "the build's output is in the trace")

	runErr = &harness.ConfigError{Err: errors.New("packaged harness codex: not installed")}
	_, err = r.rollout(t, ref(1))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type(), "the run's own configuration fails the run")
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
