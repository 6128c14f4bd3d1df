package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/agenttest"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
	"github.com/evalflow/evalflow/internal/wiring"
)

// writeTasks writes Harbor tasks, each a map of file name to content, under
// a taskset directory.
func writeTasks(t *testing.T, tasks map[string]map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, files := range tasks {
		for file, content := range files {
			p := filepath.Join(dir, name, file)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(content), 0o755))
		}
	}
	return dir
}

// harborTask is a Harbor task in a Debian sandbox: write 42 into
// /app/answer.txt, checked by test.
func harborTask(test string) map[string]string {
	return map[string]string{
		"instruction.md":         "Write 42 into /app/answer.txt.\n",
		"task.toml":              "version = \"1.0\"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n",
		"environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
		"solution/solve.sh":      "#!/bin/bash\necho 42 > /app/answer.txt\n",
		"tests/test.sh":          "#!/bin/bash\nif " + test + "; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
	}
}

// `starter audit` flags a task written to be hackable (its tests only ask
// that the file exist) with the adversary that won it, passes a sound one
// beside it and the bundled Harbor tasks, and scores a run without what it
// flagged.
func TestAuditFlagsAHackableTask(t *testing.T) {
	enginetest.Client(t) // the tasks run in containers
	t.Setenv(wiring.AgentEnv, agenttest.Agent(t))
	dir := t.TempDir()
	where := []string{"--address", freeAddr(t), "--embedded", "--ui-port", "-1", "--data-dir", filepath.Join(dir, "data"), "--runs-dir", filepath.Join(dir, "runs")}
	taskset := writeTasks(t, map[string]map[string]string{
		"sound":    harborTask(`[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]`),
		"hackable": harborTask(`[ -s /app/answer.txt ]`),
	})

	var err error
	var stderr string
	stdout := captureStdout(t, func() {
		_, stderr, err = runStarter(t, append([]string{"audit", "--run-id", "au", "--taskset", taskset}, where...)...)
	})
	require.Equal(t, exitCode(1), err, "a hackable task ends the audit with 1: %s", stderr)
	assert.Contains(t, stdout, "audit au: 2 tasks, 8 adversaries: 1 of 2 tasks can be won without doing them")
	assert.Regexp(t, `(?m)^hackable\s+placeholders\s+1\.000\s+wrote a placeholder into /app/answer\.txt`, stdout)
	assert.NotRegexp(t, `(?m)^hackable\s+common-answer\s+`, stdout, "the audit reports nothing it did not find")
	for _, line := range strings.Split(stdout, "\n") {
		assert.False(t, strings.HasPrefix(line, "sound "), "the sound task is not flagged: %s", line)
	}
	assert.NotContains(t, stdout, "the oracle scores below 1")

	// A run of the same tasks, scored without what the audit flagged.
	_, stderr, err = runStarter(t, append([]string{"eval", "--run-id", "ev", "--taskset", taskset, "--harness", "oracle"}, where...)...)
	require.NoError(t, err, stderr)
	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, "results", "--runs-dir", filepath.Join(dir, "runs"), "--exclude-flagged", "au", "ev")
	})
	require.NoError(t, err, stderr)
	assert.Contains(t, stdout, "run ev without the 1 tasks audit au flagged (hackable)")
	assert.Regexp(t, `without flagged\s+1\s+1\.000`, stdout)

	// The bundled Harbor tasks pass.
	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, append([]string{"audit", "--run-id", "bundled", "--taskset", "harbor-sample"}, where...)...)
	})
	require.NoError(t, err, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "audit bundled: 8 tasks, 8 adversaries: no adversary scored above 0 or reached the worker's host")
}
