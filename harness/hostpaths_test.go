package harness

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// A runtime on this host's files refuses a task whose scripts assume a
// sandbox's paths, naming the task, where it assumes them and the runtimes
// that honour them; a runtime that gives it a sandbox takes it.
func TestLocalRefusesATaskAssumingSandboxPaths(t *testing.T) {
	task := harborAppTask(t)
	for _, tc := range []struct {
		name string
		rt   TaskChecker
	}{
		{"local", &Local{}},
		{"netns", &Netns{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rt.CheckTask(task)
			require.Error(t, err)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce, "it fails the run, never an attempt")
			var hp *HostPathsError
			require.ErrorAs(t, err, &hp)
			assert.Equal(t, "hello-app", hp.Task)
			assert.Equal(t, "/app", hp.Workdir)
			msg := err.Error()
			for _, want := range []string{
				"task hello-app", "WORKDIR is /app", "solution/solve.sh line 4: /app", "tests/test.sh line 3: /logs/verifier",
				"the " + tc.name + " runtime", "--runtime bwrap", "--runtime docker", "$EVALFLOW_WORKSPACE",
			} {
				assert.Contains(t, msg, want)
			}
		})
	}

	auto := &Auto{Local: &Local{}, Isolated: &Bwrap{}}
	assert.NoError(t, auto.CheckTask(task), "auto sends it to a sandbox")
	assert.NoError(t, (&Auto{Local: &Local{}, Sandboxes: fakeSandboxes{}}).CheckTask(task), "or to a container")
	none := (&Auto{Local: &Local{}, NoEngine: "no engine"}).CheckTask(task)
	assert.ErrorAs(t, none, new(*ConfigError), "no sandbox here: refused")
	c, ok := CheckerOf(auto)
	require.True(t, ok)
	assert.Same(t, auto, c)
	bc, ok := CheckerOf(&Bwrap{})
	require.True(t, ok, "bwrap checks a task's verifier setup")
	assert.NoError(t, bc.CheckTask(task), "bwrap honours every path")
}

// The bundled tasks are written for every runtime ($EVALFLOW_WORKSPACE
// with /app as its default): local takes each of them.
func TestLocalTakesTheBundledTasks(t *testing.T) {
	ts, err := tasksets.HarborSample()
	require.NoError(t, err)
	for i := range ts.Len() {
		task, err := ts.Task(context.Background(), i)
		require.NoError(t, err)
		assert.NoError(t, (&Local{}).CheckTask(task), task.ID)
	}
	assert.NoError(t, (&Local{}).CheckTask(tasksets.Task{ID: "plain", Prompt: "What is 2+2?"}))
}

// Under bwrap the same task scores 1 with its solution: the refusal is the
// local runtime's, not the task's.
func TestHarborAppTaskUnderBwrap(t *testing.T) {
	task := harborAppTask(t)
	got := runTask(t, needBwrap(t), task, OracleCommand(), task.Solution)
	assert.Equal(t, 1.0, got.Reward, "%s %s", got.Stdout, got.Stderr)
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
	assert.NoError(t, checkHostPaths(tasksets.Task{ID: "t", Verify: "bash /tests/test.sh"}, "local"))
	err := checkHostPaths(tasksets.Task{ID: "t", Verify: "cat /app/out.txt"}, "local")
	var hp *HostPathsError
	require.True(t, errors.As(err, &hp), "%v", err)
	assert.Equal(t, []PathUse{{File: "verify command", Path: "/app/out.txt"}}, hp.Uses)
}

// fakeSandboxes stands in for the container runtime: Auto only asks
// whether it is there.
type fakeSandboxes struct{ Runtime }

func (fakeSandboxes) Verify(context.Context, VerifySpec) (VerifyResult, error) {
	return VerifyResult{}, nil
}

func (fakeSandboxes) PrepareWorkspace(string, tasksets.Task) (*Workspace, error) { return nil, nil }
