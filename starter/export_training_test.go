package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export/atif"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/trace"
)

func chatMessage(role, text string) dialects.Message {
	return dialects.Message{Role: role, Content: []dialects.Part{{Type: dialects.PartText, Text: text}}}
}

// toolRun stores, in a files store at dir, three rollouts of run "tools":
// a pass that called a tool (reward 1), a success with reward 0.5, and a
// failure whose one call was answered; and a fourth without a trace.
func toolRun(t *testing.T, dir string) {
	ctx := context.Background()
	store := storetest.Files(t, dir)
	defer store.Close()
	call := dialects.Message{Role: dialects.RoleAssistant,
		ToolCalls: []dialects.ToolCall{{ID: "call_1", Name: "multiply", Arguments: `{"a":6,"b":7}`}}}
	result := dialects.Message{Role: dialects.RoleTool, ToolCallID: "call_1", Content: []dialects.Part{{Type: dialects.PartText, Text: "42"}}}
	ask := []dialects.Message{chatMessage("developer", "Use the tool."), chatMessage("user", "What is 6*7?")}
	tools := []dialects.Tool{{Name: "multiply", Parameters: json.RawMessage(`{"type":"object"}`)}}
	twoCalls := []trace.Turn{
		{Index: 0, Status: 200, Request: dialects.Request{Messages: ask, Tools: tools}, Response: dialects.Response{Message: call}},
		{Index: 1, Status: 200, Request: dialects.Request{Messages: append(ask[:2:2], call, result), Tools: tools},
			Response: dialects.Response{Message: chatMessage("assistant", "42")}},
	}
	oneCall := twoCalls[:1]
	put := func(rec results.Record, turns []trace.Turn) {
		var tr *trace.Rollout
		if turns != nil {
			tr = &trace.Rollout{Key: rec.Key, Turns: turns}
		}
		_, _, err := store.Put(ctx, rec, tr)
		require.NoError(t, err)
	}
	put(storetest.Record("tools", 0, 0), twoCalls)
	half := storetest.Record("tools", 1, 0)
	half.Reward = 0.5
	put(half, oneCall)
	put(storetest.Failure(storetest.Record("tools", 2, 0), 1), oneCall)
	put(storetest.Failure(storetest.Record("tools", 3, 0), 1), nil)
}

// starter export --format atif writes a trajectory.json per rollout with a
// traced call into a directory, or one a line to a .jsonl file.
func TestExportATIFCommand(t *testing.T) {
	dir := t.TempDir()
	toolRun(t, dir)

	out := filepath.Join(t.TempDir(), "atif")
	require.NoError(t, newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--format", "atif", "--out", out, "tools"}))
	for _, key := range []string{"tools/0/0/0", "tools/0/1/0", "tools/0/2/0"} {
		b, err := os.ReadFile(filepath.Join(out, atif.FileName(key)))
		require.NoError(t, err, key)
		var tr atif.Trajectory
		require.NoError(t, json.Unmarshal(b, &tr))
		assert.Equal(t, atif.SchemaVersion, tr.SchemaVersion)
		assert.Equal(t, key, tr.SessionID)
	}
	assert.NoFileExists(t, filepath.Join(out, atif.FileName("tools/0/3/0")), "a rollout without a trace has no trajectory")
	assert.FileExists(t, filepath.Join(out, "tools~0~0~0", "trajectory.json"))

	lines := filepath.Join(t.TempDir(), "tools.jsonl")
	require.NoError(t, newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--format", "atif", "--out", lines, "tools"}))
	var keys []string
	f, err := os.Open(lines)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var tr atif.Trajectory
		require.NoError(t, json.Unmarshal(sc.Bytes(), &tr))
		keys = append(keys, tr.SessionID)
	}
	assert.Equal(t, []string{"tools/0/0/0", "tools/0/1/0", "tools/0/2/0"}, keys)

	err = newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--format", "atif", "--passed", "tools"})
	assert.ErrorContains(t, err, "--passed and --min-reward go with --format sft")
	err = newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--format", "csv", "tools"})
	assert.ErrorContains(t, err, `--format "csv": want jsonl, parquet, atif or sft`)
}

// readWithPython loads an SFT export with Python's json module and says,
// per conversation, its key and its messages' roles.
func readWithPython(t *testing.T, path string) (keys []string, roles [][]string) {
	script := `import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(json.dumps({"keys": [r["key"] for r in rows], "roles": [[m["role"] for m in r["messages"]] for r in rows]}))`
	out, err := exec.Command("python3", "-c", script, path).Output()
	require.NoError(t, err, "python3 reads %s", path)
	var got struct {
		Keys  []string   `json:"keys"`
		Roles [][]string `json:"roles"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	return got.Keys, got.Roles
}

// starter export --format sft writes one conversation per rollout the
// filters keep, each the final conversation of its rollout, and Python's
// json module reads every line.
func TestExportSFTCommand(t *testing.T) {
	dir := t.TempDir()
	toolRun(t, dir)
	out := filepath.Join(t.TempDir(), "sft.jsonl")
	export := func(flags ...string) []string {
		args := append(append([]string{"starter", "export", "--runs-dir", dir, "--format", "sft", "--out", out}, flags...), "tools")
		require.NoError(t, newApp().Run(args))
		keys, _ := readWithPython(t, out)
		return keys
	}

	require.NoError(t, newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--format", "sft", "--passed", "--out", out, "tools"}))
	keys, roles := readWithPython(t, out)
	assert.Equal(t, []string{"tools/0/0/0"}, keys, "one conversation per passed rollout")
	assert.Equal(t, [][]string{{"system", "user", "assistant", "tool", "assistant"}}, roles)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.JSONEq(t, `{"key": "tools/0/0/0", "task_id": "task-0", "reward": 1,
		"tools": [{"type": "function", "function": {"name": "multiply", "parameters": {"type": "object"}}}],
		"messages": [
			{"role": "system", "content": "Use the tool."},
			{"role": "user", "content": "What is 6*7?"},
			{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "multiply", "arguments": "{\"a\":6,\"b\":7}"}}]},
			{"role": "tool", "content": "42", "tool_call_id": "call_1"},
			{"role": "assistant", "content": "42"}]}`, string(b))

	assert.Equal(t, []string{"tools/0/0/0", "tools/0/1/0"}, export("--min-reward", "0.5"))
	assert.Equal(t, []string{"tools/0/0/0", "tools/0/1/0"}, export("--passed", "--min-reward", "0.5"))
	assert.Equal(t, []string{"tools/0/0/0", "tools/0/1/0", "tools/0/2/0"}, export(), "no filter: every rollout with an answered call")

	err = newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--format", "sft", "--min-reward", "2", "--out", out, "tools"})
	assert.ErrorContains(t, err, "no rollout with an answered model call that the filter keeps")
	assert.NoFileExists(t, out, "a failed export leaves no file")
	err = newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--min-reward", "1", "tools"})
	assert.ErrorContains(t, err, "--min-reward goes with --format sft")
}
