package local

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/hostpaths"
	"github.com/evalflow/evalflow/tasksets"
)

// A runtime on this host's files refuses a task whose scripts assume a
// sandbox's paths, naming itself; bwrap, which gives the task a sandbox,
// takes it.
func TestLocalRefusesATaskAssumingSandboxPaths(t *testing.T) {
	task := tasksets.Task{ID: "app", Verify: "cat /app/out.txt"}
	for _, tc := range []struct {
		name string
		rt   harness.TaskChecker
	}{
		{"local", &Runtime{}},
		{"netns", &Netns{}},
	} {
		err := tc.rt.CheckTask(task)
		require.ErrorAs(t, err, new(*harness.ConfigError), "%s: it fails the run, never an attempt", tc.name)
		var hp *hostpaths.Error
		require.ErrorAs(t, err, &hp, tc.name)
		assert.Equal(t, tc.name, hp.Runtime)
	}
	bc, ok := harness.CheckerOf(&Bwrap{})
	require.True(t, ok, "bwrap checks a task's verifier setup")
	assert.NoError(t, bc.CheckTask(task), "bwrap honours every path")
}

// Under bwrap a Harbor task whose scripts use /app and /logs, which the
// local runtime refuses, scores 1 with its solution: the refusal is the
// local runtime's, not the task's.
func TestHarborAppTaskUnderBwrap(t *testing.T) {
	h, err := tasksets.OpenHarbor("../hostpaths/testdata/harbor-app")
	require.NoError(t, err)
	task, err := h.Task(context.Background(), 0)
	require.NoError(t, err)
	require.Error(t, (&Runtime{}).CheckTask(task))
	got := runTask(t, needBwrap(t), task, harness.OracleCommand(), task.Solution)
	assert.Equal(t, 1.0, got.Reward, "%s %s", got.Stdout, got.Stderr)
}

// A runtime without a separate verifier refuses a task that asks for one,
// naming the task and the key, at the run's start.
func TestSeparateVerifierRefusedWhereNoneCanBeHad(t *testing.T) {
	task := tasksets.Task{ID: "apart", Info: []byte(`{"verifier":{"environment_mode":"separate"}}`)}
	for name, rt := range map[string]harness.TaskChecker{"local": &Runtime{}, "bwrap": &Bwrap{}, "netns": &Netns{}} {
		err := rt.CheckTask(task)
		var ce *harness.ConfigError
		require.ErrorAs(t, err, &ce, name)
		assert.ErrorContains(t, err, `task apart asks for [verifier] environment_mode = "separate"`, name)
		assert.ErrorContains(t, err, "the "+name+" runtime cannot give", name)
		assert.NoError(t, rt.CheckTask(tasksets.Task{ID: "shared"}), name)
	}
}
