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
