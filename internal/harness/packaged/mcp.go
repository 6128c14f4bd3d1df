package packaged

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// sideEnvNames are the variables a task's tool servers get from the
// harness's environment: where the rollout's state and task are, and its
// secret. Written into no file: the harness forwards them.
var sideEnvNames = []string{"EVALFLOW_BASE_URL", "EVALFLOW_STATE_URL", "EVALFLOW_TASK_URL", harness.RolloutSecretEnv}

// mcpClaudeConfig is claude-code's --mcp-config file, in the session.
const mcpClaudeConfig = "mcp.json"

// checkSide refuses what a packaged harness cannot run beside it: a
// simulated user (the turns with a user are the built-in agent's) and an
// HTTP tool server (the harness starts only stdio servers itself).
func checkSide(name string, t tasksets.Task) error {
	if t.User != nil {
		return &harness.ConfigError{Err: fmt.Errorf("task %s has a simulated user: run it with the built-in agent, not %s", t.ID, name)}
	}
	for _, s := range t.Tools {
		if s.Transport == tasksets.TransportHTTP {
			return &harness.ConfigError{Err: fmt.Errorf("task %s: tool server %s speaks HTTP; %s starts stdio tool servers only", t.ID, s.Name, name)}
		}
	}
	return nil
}

// codexMCP is the [mcp_servers.NAME] tables of codex's config.toml for a
// task's tool servers: the command, its arguments, the task's own
// variables, and the rollout's forwarded from codex's environment
// (env_vars), so that the secret is in no file.
func codexMCP(t tasksets.Task) string {
	var b strings.Builder
	for _, s := range t.Tools {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\ncommand = %s\nargs = %s\nenv_vars = %s\n",
			s.Name, strconv.Quote(s.Command[0]), tomlStrings(s.Command[1:]), tomlStrings(sideEnvNames))
		if len(s.Env) > 0 {
			fmt.Fprintf(&b, "\n[mcp_servers.%s.env]\n", s.Name)
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				fmt.Fprintf(&b, "%s = %s\n", strconv.Quote(k), strconv.Quote(s.Env[k]))
			}
		}
	}
	return b.String()
}

// claudeMCP writes claude-code's --mcp-config file for a task's tool
// servers into session and returns the arguments that load it, and only
// it. The rollout's variables are written as ${NAME}, which claude-code
// expands from its environment: the secret is in no file.
func claudeMCP(session string, t tasksets.Task) ([]string, error) {
	if len(t.Tools) == 0 {
		return nil, nil
	}
	type server struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	servers := map[string]server{}
	for _, s := range t.Tools {
		env := maps.Clone(s.Env)
		if env == nil {
			env = map[string]string{}
		}
		for _, name := range sideEnvNames {
			env[name] = "${" + name + "}"
		}
		servers[s.Name] = server{Type: "stdio", Command: s.Command[0], Args: append([]string{}, s.Command[1:]...), Env: env}
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(session, mcpClaudeConfig)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	return []string{"--mcp-config", path, "--strict-mcp-config"}, nil
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
