package tasksets

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJSONLToolsAndUser(t *testing.T) {
	path := writeFile(t, "tasks.jsonl",
		`{"id": "a", "prompt": "count", "answer": "3", "tools": [{"name": "counter", "command": ["counter", "-v"], "env": {"MODE": "x"}},`+
			` {"name": "web", "command": ["srv"], "transport": "http", "port": 8931, "path": "/rpc"}],`+
			` "user": {"command": ["sh", "user.sh"], "max_turns": 3}}`+"\n"+
			`{"id": "b", "prompt": "talk", "user": {"persona": "You are {{prompt}}"}}`+"\n")
	ts, err := OpenFile(path)
	require.NoError(t, err)
	defer ts.Close()

	a, err := ts.Task(context.Background(), 0)
	require.NoError(t, err)
	require.Len(t, a.Tools, 2)
	assert.Equal(t, ToolServer{Name: "counter", Command: []string{"counter", "-v"}, Env: map[string]string{"MODE": "x"}}, a.Tools[0])
	assert.Equal(t, "http://127.0.0.1:8931/rpc", a.Tools[1].URL())
	require.NotNil(t, a.User)
	assert.Equal(t, 3, a.User.Turns())

	// The agent sees the tools and the user, never the answer.
	h := a.ForHarness()
	assert.Equal(t, a.Tools, h.Tools)
	assert.Equal(t, a.User, h.User)
	assert.Empty(t, h.Answer)

	b, err := ts.Task(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, "You are {{prompt}}", b.User.Persona)
	assert.Equal(t, DefaultUserTurns, b.User.Turns())
	assert.Equal(t, "http://127.0.0.1:1/mcp", ToolServer{Port: 1}.URL())
}

func TestJSONLBadToolsAndUsers(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`{"id": "a", "prompt": "p", "tools": [{"name": "", "command": ["x"]}]}`, "name must be"},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "a b", "command": ["x"]}]}`, "name must be"},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "a__b", "command": ["x"]}]}`, `"__"`},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "c", "command": ["x"]}, {"name": "c", "command": ["y"]}]}`, "used twice"},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "c"}]}`, "no command"},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "c", "command": ["x"], "transport": "sse"}]}`, "stdio or http"},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "c", "command": ["x"], "transport": "http"}]}`, "needs a port"},
		{`{"id": "a", "prompt": "p", "tools": [{"name": "c", "command": ["x"], "port": 80}]}`, "http transport"},
		{`{"id": "a", "prompt": "p", "user": {}}`, "exactly one"},
		{`{"id": "a", "prompt": "p", "user": {"command": ["x"], "persona": "y"}}`, "exactly one"},
		{`{"id": "a", "prompt": "p", "user": {"persona": "y", "max_turns": -1}}`, "max_turns"},
	} {
		ts, err := OpenFile(writeFile(t, "tasks.jsonl", tt.line+"\n"))
		if err == nil {
			_, err = ts.Task(context.Background(), 0)
			ts.Close()
		}
		require.Error(t, err, "%s", tt.line)
		assert.Contains(t, err.Error(), tt.want, "%s", tt.line)
	}
}

func TestHarborToolsAndUser(t *testing.T) {
	root := t.TempDir()
	files := harborTask("a-tools")
	files["a-tools/task.toml"] = `version = "1.0"

[[tools]]
name = "counter"
command = ["counter"]

[tools.env]
MODE = "x"

[user]
persona = "You are a student: {{prompt}}"
max_turns = 2
`
	writeTree(t, root, files)
	h, err := OpenHarbor(root)
	require.NoError(t, err)
	task, err := h.Task(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, []ToolServer{{Name: "counter", Command: []string{"counter"}, Env: map[string]string{"MODE": "x"}}}, task.Tools)
	assert.Equal(t, &User{Persona: "You are a student: {{prompt}}", MaxTurns: 2}, task.User)
	var info map[string]any
	require.NoError(t, json.Unmarshal(task.Info, &info))
	assert.NotContains(t, info, "tools", "the tables read into the task are not repeated in info")
	assert.NotContains(t, info, "user")

	bad := t.TempDir()
	files = harborTask("b-bad")
	files["b-bad/task.toml"] = "[[tools]]\nname = \"x\"\ncommand = \"not a list\"\n"
	writeTree(t, bad, files)
	_, err = OpenHarbor(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[[tools]]")
}

// Harbor's [[environment.mcp_servers]]: a stdio server is a tool server
// like [[tools]]; one reached by URL is refused, named.
func TestHarborEnvironmentMCPServers(t *testing.T) {
	root := t.TempDir()
	files := harborTask("a-mcp")
	files["a-mcp/task.toml"] = `version = "1.0"

[environment]
cpus = 1

[[environment.mcp_servers]]
name = "files"
transport = "stdio"
command = "mcp-files"
args = ["--root", "/app"]
`
	writeTree(t, root, files)
	h, err := OpenHarbor(root)
	require.NoError(t, err)
	task, err := h.Task(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, []ToolServer{{Name: "files", Command: []string{"mcp-files", "--root", "/app"}}}, task.Tools)
	var info struct{ Environment map[string]any }
	require.NoError(t, json.Unmarshal(task.Info, &info))
	assert.Equal(t, map[string]any{"cpus": 1.0}, info.Environment, "the servers are not repeated in info")

	bad := t.TempDir()
	files = harborTask("b-url")
	files["b-url/task.toml"] = "[[environment.mcp_servers]]\nname = \"remote\"\ntransport = \"streamable-http\"\nurl = \"http://mcp-server:8000/mcp\"\n"
	writeTree(t, bad, files)
	_, err = OpenHarbor(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"remote": transport "streamable-http"`)
}
