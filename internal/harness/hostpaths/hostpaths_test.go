package hostpaths

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// harborAppTask is a task written as Harbor tasks are: its solution and its
// tests use /app and /logs, the paths of its container.
func harborAppTask(t *testing.T) tasksets.Task {
	t.Helper()
	h, err := tasksets.OpenHarbor("testdata/harbor-app")
	require.NoError(t, err)
	task, err := h.Task(context.Background(), 0)
	require.NoError(t, err)
	return task
}

// A task whose scripts assume a sandbox's paths is refused, naming the
// task, where it assumes them, the runtime that refuses it and the
// runtimes that honour them.
func TestCheckRefusesATaskAssumingSandboxPaths(t *testing.T) {
	task := harborAppTask(t)
	for _, runtime := range []string{"local", "netns"} {
		t.Run(runtime, func(t *testing.T) {
			err := Check(task, runtime)
			require.Error(t, err)
			var ce *harness.ConfigError
			require.ErrorAs(t, err, &ce, "it fails the run, never an attempt")
			var hp *Error
			require.ErrorAs(t, err, &hp)
			assert.Equal(t, "hello-app", hp.Task)
			assert.Equal(t, "/app", hp.Workdir)
			msg := err.Error()
			for _, want := range []string{
				"task hello-app", "WORKDIR is /app", "solution/solve.sh line 4: /app", "tests/test.sh line 3: /logs/verifier",
				"the " + runtime + " runtime", "--runtime bwrap", "--runtime docker", "$EVALFLOW_WORKSPACE",
			} {
				assert.Contains(t, msg, want)
			}
		})
	}
}

// The bundled tasks are written for every runtime ($EVALFLOW_WORKSPACE
// with /app as its default): none is refused.
func TestCheckTakesTheBundledTasks(t *testing.T) {
	ts, err := tasksets.HarborSample()
	require.NoError(t, err)
	for i := range ts.Len() {
		task, err := ts.Task(context.Background(), i)
		require.NoError(t, err)
		assert.NoError(t, Check(task, "local"), task.ID)
	}
	assert.NoError(t, Check(tasksets.Task{ID: "plain", Prompt: "What is 2+2?"}, "local"))
}

func TestScanPaths(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // "" is none found
	}{
		{`cd /app`, "/app"},
		{`printf 'x' > /app/hello.txt`, "/app/hello.txt"},
		{`echo 1 > /logs/verifier/reward.txt`, "/logs/verifier/reward.txt"},
		{`python3 /tests/test_outputs.py`, "/tests/test_outputs.py"},
		{`path = "/app/out.txt"`, "/app/out.txt"},
		{`ls --root=/app`, "/app"},
		{`bash /solution/solve.sh;`, "/solution/solve.sh"},
		{`cd "${EVALFLOW_WORKSPACE:-/app}"`, ""},
		{`logs="${EVALFLOW_VERIFIER_LOGS-/logs/verifier}"`, ""},
		{`app = os.environ.get("EVALFLOW_WORKSPACE", "/app")`, ""},
		{`# Checks /app/hello.txt`, ""},
		{`echo ok # writes /app/x`, ""},
		{`cat /application/x /apps /usr/app/x ./app`, ""},
	} {
		found := scanPaths([]byte(tc.line), sandboxPaths)
		if tc.want == "" {
			assert.Empty(t, found, tc.line)
			continue
		}
		if assert.Len(t, found, 1, tc.line) {
			assert.Equal(t, tc.want, found[0].Path, tc.line)
			assert.Equal(t, 1, found[0].Line)
		}
	}
}

// A verify command's /tests is rewritten on the host: only its other
// sandbox paths count.
func TestVerifyCommandPaths(t *testing.T) {
	assert.NoError(t, Check(tasksets.Task{ID: "t", Verify: "bash /tests/test.sh"}, "local"))
	err := Check(tasksets.Task{ID: "t", Verify: "cat /app/out.txt"}, "local")
	var hp *Error
	require.True(t, errors.As(err, &hp), "%v", err)
	assert.Equal(t, []Use{{File: "verify command", Path: "/app/out.txt"}}, hp.Uses)
}
