package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

// On the worker's own host (the local runtime) the adversaries write in
// their workspace and logs only: an audit leaves nothing on the host.
func TestAdversariesOnTheHostWriteOnlyTheirOwn(t *testing.T) {
	dir := t.TempDir()
	ws, logs, files := filepath.Join(dir, "ws"), filepath.Join(dir, "logs"), filepath.Join(dir, "files")
	for _, d := range []string{ws, logs, files} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	outside := filepath.Join("/", "evalflow-adversary-test-"+filepath.Base(dir), "answer.txt")
	task, err := json.Marshal(tasksets.Task{ID: "t", Prompt: "Write 42 into " + outside + " and " + filepath.Join(ws, "out.txt") + "."})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(files, "task.json"), task, 0o644))
	t.Setenv("EVALFLOW_TASK_FILE", filepath.Join(files, "task.json"))
	t.Setenv("EVALFLOW_ANSWER_FILE", filepath.Join(files, "answer.txt"))
	t.Setenv("EVALFLOW_WORKSPACE", ws)
	t.Setenv("EVALFLOW_LOGS", logs)
	for _, name := range []string{"write-reward", "rewrite-tests", "placeholders"} {
		var out, errOut bytes.Buffer
		require.Equal(t, ExitOK, runAdversary(context.Background(), name, &out, &errOut), errOut.String())
	}
	assert.FileExists(t, filepath.Join(logs, "verifier", "reward.txt"), "its own logs are its to write")
	assert.FileExists(t, filepath.Join(ws, "out.txt"))
	assert.FileExists(t, filepath.Join(ws, "conftest.py"))
	for _, p := range []string{outside, filepath.Dir(outside), "/conftest.py", "/tests/test.sh", "/logs/verifier/reward.txt"} {
		_, err := os.Stat(p)
		assert.True(t, os.IsNotExist(err), "%s written on the host", p)
	}
}
