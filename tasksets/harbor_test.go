package tasksets

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTree writes files (path relative to root → content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

// harborTask is a valid task directory's files, under name/.
func harborTask(name string) map[string]string {
	return map[string]string{
		name + "/instruction.md": "Do " + name + ".\n",
		name + "/task.toml":      "version = \"1.0\"\n",
		name + "/tests/test.sh":  "echo 1 > /logs/verifier/reward.txt\n",
	}
}

func TestHarborTask(t *testing.T) {
	root := t.TempDir()
	files := harborTask("b-full")
	files["b-full/task.toml"] = `version = "1.0"
custom = "kept"

[metadata]
author_name = "someone"
difficulty = "easy"
tags = ["shell", "files"]

[task]
name = "Full task"
description = "Has everything"

[agent]
timeout_sec = 300.0

[verifier]
timeout_sec = 45
other = true

[verifier.env]
MODE = "strict"
LEVEL = "2"

[environment]
docker_image = "debian:bookworm-slim"
cpus = 2
memory_mb = 2048
build_timeout_sec = 600.0
gpus = 0
`
	files["b-full/environment/Dockerfile"] = "FROM debian:bookworm-slim\n"
	files["b-full/solution/solve.sh"] = "true\n"
	for k, v := range harborTask("a-bare") {
		files[k] = v
	}
	files["README.md"] = "not a task\n"
	files[".git/config"] = "hidden\n"
	writeTree(t, root, files)

	h, err := OpenHarbor(root)
	require.NoError(t, err)
	require.Equal(t, int64(2), h.Len())

	bare, err := h.Task(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, Task{
		ID: "a-bare", Prompt: "Do a-bare.\n", Info: json.RawMessage(`{"version":"1.0"}`),
		Tests: filepath.Join(root, "a-bare", "tests"), Verify: "bash /tests/test.sh",
	}, bare)

	full, err := h.Task(context.Background(), 1)
	require.NoError(t, err)
	dir := filepath.Join(root, "b-full")
	assert.Equal(t, "b-full", full.ID)
	assert.Equal(t, filepath.Join(dir, "environment"), full.Environment)
	assert.Equal(t, filepath.Join(dir, "tests"), full.Tests)
	assert.Equal(t, filepath.Join(dir, "solution"), full.Solution)
	assert.Equal(t, HarborVerify, full.Verify)
	assert.True(t, full.Verified())
	assert.Equal(t, 300*time.Second, full.AgentTimeout)
	assert.Equal(t, 45*time.Second, full.VerifierTimeout)
	assert.Equal(t, map[string]string{"MODE": "strict", "LEVEL": "2"}, full.VerifierEnv)

	var info map[string]any
	require.NoError(t, json.Unmarshal(full.Info, &info))
	assert.Equal(t, "kept", info["custom"], "unknown keys are kept")
	assert.Equal(t, map[string]any{"author_name": "someone", "difficulty": "easy", "tags": []any{"shell", "files"}}, info["metadata"])
	assert.Equal(t, map[string]any{"name": "Full task", "description": "Has everything"}, info["task"])
	assert.Equal(t, map[string]any{"docker_image": "debian:bookworm-slim", "cpus": float64(2), "memory_mb": float64(2048),
		"build_timeout_sec": 600.0, "gpus": float64(0)}, info["environment"])
	assert.Equal(t, map[string]any{"timeout_sec": float64(45), "other": true}, info["verifier"],
		"the verifier's env stays out of Info, which the agent sees")
	assert.NotContains(t, string(full.ForHarness().Info), "strict")
}

// TestHarborTaskReadsOnlyItsDirectory: Task(i) reads task i's files when
// asked, and only those.
func TestHarborTaskReadsOnlyItsDirectory(t *testing.T) {
	root := t.TempDir()
	files := harborTask("one")
	for k, v := range harborTask("two") {
		files[k] = v
	}
	writeTree(t, root, files)
	h, err := OpenHarbor(root)
	require.NoError(t, err)

	require.NoError(t, os.Remove(filepath.Join(root, "one", "task.toml")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "two", "instruction.md"), []byte("Changed.\n"), 0o644))

	two, err := h.Task(context.Background(), 1)
	require.NoError(t, err, "task two does not depend on task one's files")
	assert.Equal(t, "Changed.\n", two.Prompt, "Task reads the instruction when asked")
	_, err = h.Task(context.Background(), 0)
	assert.ErrorContains(t, err, "task one: task.toml is missing")

	for _, i := range []int64{-1, 2} {
		_, err := h.Task(context.Background(), i)
		assert.Error(t, err, "Task(%d)", i)
	}
}

func TestHarborBadTasks(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	add := func(name string, change func(m map[string]string)) {
		m := harborTask(name)
		change(m)
		for k, v := range m {
			files[k] = v
		}
	}
	add("good", func(map[string]string) {})
	add("no-instruction", func(m map[string]string) { delete(m, "no-instruction/instruction.md") })
	add("empty-instruction", func(m map[string]string) { m["empty-instruction/instruction.md"] = " \n\t\n" })
	add("no-toml", func(m map[string]string) { delete(m, "no-toml/task.toml") })
	add("bad-toml", func(m map[string]string) { m["bad-toml/task.toml"] = "[agent]\ntimeout_sec = = Q\n" })
	add("string-timeout", func(m map[string]string) { m["string-timeout/task.toml"] = "[agent]\ntimeout_sec = \"Q\"\n" })
	add("negative-timeout", func(m map[string]string) { m["negative-timeout/task.toml"] = "[verifier]\ntimeout_sec = -1\n" })
	add("env-not-strings", func(m map[string]string) { m["env-not-strings/task.toml"] = "[verifier.env]\nQ = 1\n" })
	add("no-tests", func(m map[string]string) { delete(m, "no-tests/tests/test.sh"); m["no-tests/tests/other.sh"] = "" })
	add("env-is-file", func(m map[string]string) { m["env-is-file/environment"] = "Q" })
	add("two-problems", func(m map[string]string) {
		delete(m, "two-problems/instruction.md")
		delete(m, "two-problems/tests/test.sh")
		m["two-problems/tests/x"] = ""
	})
	writeTree(t, root, files)
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "a-fifo"), 0o600))

	_, err := OpenHarbor(root)
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		"11 bad task(s)",
		"a-fifo: a named pipe (FIFO), not a task directory",
		"no-instruction: instruction.md is missing",
		"empty-instruction: instruction.md is empty",
		"no-toml: task.toml is missing",
		"bad-toml: task.toml: line 2, column 15: invalid TOML",
		"string-timeout: task.toml: [agent] timeout_sec must be a number",
		"negative-timeout: task.toml: [verifier] timeout_sec must be a number of seconds from 0",
		"env-not-strings: task.toml: [verifier.env] values must be strings",
		"no-tests: tests/test.sh is missing",
		"env-is-file: environment is a regular file, not a directory",
		"two-problems: instruction.md is missing, tests/test.sh is missing",
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "good:")
	assert.NotContains(t, strings.TrimPrefix(msg, "open taskset "+root), "Q", "errors never quote the task files")
}

// TestHarborRefusesSpecialFiles: a task file that is a FIFO is refused
// without blocking on it.
func TestHarborRefusesSpecialFiles(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"instruction.md", "t: instruction.md: is a named pipe (FIFO): not a regular file"},
		{"task.toml", "t: task.toml: is a named pipe (FIFO): not a regular file"},
		{"tests/test.sh", "t: tests/test.sh is a named pipe (FIFO), not a regular file"},
	}
	for _, tt := range tests {
		root := t.TempDir()
		files := harborTask("t")
		delete(files, "t/"+tt.file)
		writeTree(t, root, files)
		fifo := filepath.Join(root, "t", tt.file)
		require.NoError(t, os.MkdirAll(filepath.Dir(fifo), 0o755))
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))

		done := make(chan error, 1)
		go func() {
			_, err := OpenHarbor(root)
			done <- err
		}()
		var err error
		require.Eventually(t, func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		}, 5*time.Second, 5*time.Millisecond, "OpenHarbor blocked on a FIFO %s", tt.file)
		assert.ErrorContains(t, err, tt.want)
	}
}

func TestHarborNotADirectory(t *testing.T) {
	_, err := OpenHarbor(writeFile(t, "tasks.txt", "x"))
	assert.ErrorContains(t, err, "is a regular file, not a directory of tasks")
	_, err = OpenHarbor(t.TempDir())
	assert.ErrorContains(t, err, "no task directories")
}

// TestHarborSample: the bundled tasks open, each with everything a task
// with a workspace has, and extracting them again reuses the cache.
func TestHarborSample(t *testing.T) {
	h, err := HarborSample()
	require.NoError(t, err)
	require.GreaterOrEqual(t, h.Len(), int64(8))
	dir, err := HarborSampleDir()
	require.NoError(t, err)
	assert.Equal(t, h.Dir(), dir, "the cache is reused")
	sum, err := harborSampleHash()
	require.NoError(t, err)
	assert.Equal(t, HarborSampleName+"-"+sum[:16], filepath.Base(dir), "the cache is named by the content")

	metrics := 0
	for i := range h.Len() {
		task, err := h.Task(context.Background(), i)
		require.NoError(t, err)
		assert.NotEmpty(t, task.Environment, "%s has an environment", task.ID)
		assert.FileExists(t, filepath.Join(task.Environment, "Dockerfile"), task.ID)
		assert.FileExists(t, filepath.Join(task.Solution, "solve.sh"), task.ID)
		assert.Positive(t, task.AgentTimeout, task.ID)
		assert.Positive(t, task.VerifierTimeout, task.ID)
		fi, err := os.Stat(filepath.Join(task.Tests, "test.sh"))
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&0o100, "%s: test.sh is executable", task.ID)
		script, err := os.ReadFile(filepath.Join(task.Tests, "test.sh"))
		require.NoError(t, err)
		if strings.Contains(string(script), "reward.json") {
			metrics++
		}
	}
	assert.Positive(t, metrics, "a bundled task writes reward.json")

	ts, err := Open(HarborSampleName)
	require.NoError(t, err)
	assert.Equal(t, h.Len(), ts.Len())
}

// TestWriteHarborSample: extraction writes every embedded file, scripts
// executable.
func TestWriteHarborSample(t *testing.T) {
	dst := t.TempDir()
	require.NoError(t, writeHarborSample(dst))
	fi, err := os.Stat(filepath.Join(dst, "fix-fizzbuzz", "environment", "app", "fizzbuzz.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	fi, err = os.Stat(filepath.Join(dst, "hello-file", "instruction.md"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}
