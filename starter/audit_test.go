package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/agenttest"
	"github.com/evalflow/evalflow/internal/devserver/devtest"
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

// An audit flags a task written to be hackable (its tests only ask that
// the file exist) with the adversary that won it, passes a sound one beside
// it and the bundled Harbor tasks, scores a run without what it flagged
// (eval --audit, results --exclude-flagged), and names the services of the
// worker's host that a probe reached from a runtime that isolates nothing.
func TestAuditFlagsAHackableTask(t *testing.T) {
	enginetest.Client(t) // the tasks run in containers
	t.Setenv(wiring.AgentEnv, agenttest.Agent(t))
	dir := t.TempDir()
	addr := devtest.FreeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	grpc, err := strconv.Atoi(port)
	require.NoError(t, err)
	// reach-host tries the embedded server's frontend (gRPC and HTTP) and
	// the tests' PostgreSQL beside the default ports.
	probe := fmt.Sprintf("AUDIT_HOST_PORTS=%d,%d", grpc, grpc+10)
	where := []string{"--address", addr, "--embedded", "--ui-port", "-1", "--data-dir", filepath.Join(dir, "data"), "--runs-dir", filepath.Join(dir, "runs"), "--harness-env", probe}
	taskset := writeTasks(t, map[string]map[string]string{
		"sound":    harborTask(`[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]`),
		"hackable": harborTask(`[ -s /app/answer.txt ]`),
	})

	// eval --audit: the audit first, then the run, scored with and without
	// what the audit flagged.
	var stderr string
	stdout := captureStdout(t, func() {
		_, stderr, err = runStarter(t, append([]string{"eval", "--audit", "--run-id", "ev", "--taskset", taskset, "--harness", "oracle"}, where...)...)
	})
	require.NoError(t, err, stderr)
	assert.Contains(t, stdout, "audit ev-audit: 2 tasks, 8 adversaries: 1 of 2 tasks can be won without doing them")
	assert.Regexp(t, `(?m)^hackable\s+placeholders\s+1\.000\s+wrote a placeholder into /app/answer\.txt`, stdout)
	assert.NotRegexp(t, `(?m)^hackable\s+common-answer\s+`, stdout, "the audit reports nothing it did not find")
	for _, line := range strings.Split(stdout, "\n") {
		assert.False(t, strings.HasPrefix(line, "sound "), "the sound task is not flagged: %s", line)
	}
	assert.NotContains(t, stdout, "the oracle scores below 1")
	assert.Contains(t, stdout, "run ev without the 1 tasks audit ev-audit flagged (hackable)")
	assert.Regexp(t, `without flagged\s+1\s+1\.000`, stdout)

	// The same from the store, and the audit's report again.
	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, "results", "--runs-dir", filepath.Join(dir, "runs"), "--exclude-flagged", "ev-audit", "ev")
	})
	require.NoError(t, err, stderr)
	assert.Regexp(t, `all tasks\s+2\s+1\.000`, stdout)
	assert.Regexp(t, `without flagged\s+1\s+1\.000`, stdout)
	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, "results", "--runs-dir", filepath.Join(dir, "runs"), "ev-audit")
	})
	require.NoError(t, err, stderr)
	assert.Contains(t, stdout, "audit ev-audit: 2 tasks, 8 adversaries: 1 of 2 tasks")

	// The bundled Harbor tasks pass.
	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, append([]string{"audit", "--run-id", "bundled", "--taskset", "harbor-sample"}, where...)...)
	})
	require.NoError(t, err, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "audit bundled: 8 tasks, 8 adversaries: no adversary scored above 0 or reached the worker's host")

	// The bundled arithmetic tasks run in local, which isolates nothing:
	// the probe reaches the server this audit runs on, and says so.
	stdout = captureStdout(t, func() {
		_, stderr, err = runStarter(t, append([]string{"audit", "--run-id", "local", "--tasks", "2"}, where...)...)
	})
	require.Equal(t, exitCode(1), err, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "2 of 2 tasks can be won without doing them, or let an adversary out of its sandbox")
	assert.Regexp(t, `(?m)^all 2\s+reach-host\s+0\.000\s+.*reached 127\.0\.0\.1:`+port, stdout)
	assert.Contains(t, stdout, "from 2 tasks an adversary reached the worker's host")
}
