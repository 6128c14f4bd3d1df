package tasksets

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Tool server transports.
const (
	// TransportStdio is MCP over the server's stdin and stdout: the
	// harness (the MCP client) starts the command itself.
	TransportStdio = "stdio"
	// TransportHTTP is MCP's streamable HTTP: the command serves it on
	// 127.0.0.1:Port at Path, beside the harness.
	TransportHTTP = "http"
)

// UserDone is the marker a user simulator's reply holds when the user is
// satisfied: the conversation ends there. An empty reply ends it too.
const UserDone = "[DONE]"

// DefaultUserTurns bounds a user simulator's turns when the task sets none.
const DefaultUserTurns = 8

// ToolServer is an MCP tool server a task gives its agent. The server runs
// in the rollout's runtime, beside the harness, and reaches the rollout's
// shared state at EVALFLOW_STATE_URL and its task at EVALFLOW_TASK_URL with
// EVALFLOW_ROLLOUT_SECRET, all three in its environment only.
type ToolServer struct {
	// Name names the server; the agent offers its tools as NAME__TOOL.
	Name string `json:"name"`
	// Command starts the server: argv, run through no shell.
	Command []string `json:"command"`
	// Env holds extra variables of the server's environment.
	Env map[string]string `json:"env,omitempty"`
	// Transport is TransportStdio (the default) or TransportHTTP.
	Transport string `json:"transport,omitempty"`
	// Port and Path are where an HTTP server listens on loopback (Path
	// defaults to /mcp).
	Port int    `json:"port,omitempty"`
	Path string `json:"path,omitempty"`
}

// URL is where an HTTP tool server answers.
func (s ToolServer) URL() string {
	path := s.Path
	if path == "" {
		path = "/mcp"
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", s.Port, path)
}

// User is the simulated user a task's agent talks with: after each answer
// of the agent, the user replies, until it says UserDone or its turns run
// out. Exactly one of Command and Persona is set.
type User struct {
	// Command is run once per user turn, in the rollout's runtime beside
	// the harness: the conversation so far on its stdin as JSON
	// ({"turn": n, "messages": [{"role", "content"}…]}), its reply on
	// stdout, with the same environment as a tool server.
	Command []string `json:"command,omitempty"`
	// Persona is a prompt template the worker runs through its model
	// provider for each user turn: {{prompt}} is the task's prompt and
	// {{conversation}} the conversation so far, written out.
	Persona string `json:"persona,omitempty"`
	// MaxTurns bounds the user's turns; 0 is DefaultUserTurns.
	MaxTurns int `json:"max_turns,omitempty"`
}

// Turns is the user's bound on turns.
func (u User) Turns() int {
	if u.MaxTurns > 0 {
		return u.MaxTurns
	}
	return DefaultUserTurns
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,48}$`)

// checkTools validates a task's tool servers and user.
func checkTools(servers []ToolServer, user *User) error {
	seen := map[string]bool{}
	for i, s := range servers {
		switch {
		case !toolName.MatchString(s.Name):
			return fmt.Errorf("tools[%d]: name must be 1 to 48 letters, digits, _ or -", i)
		case strings.Contains(s.Name, "__"):
			return fmt.Errorf("tools[%d]: name must not hold \"__\" (it joins server and tool names)", i)
		case seen[s.Name]:
			return fmt.Errorf("tools[%d]: name %q is used twice", i, s.Name)
		case len(s.Command) == 0 || s.Command[0] == "":
			return fmt.Errorf("tools[%d]: no command", i)
		}
		seen[s.Name] = true
		switch s.Transport {
		case "", TransportStdio:
			if s.Port != 0 {
				return fmt.Errorf("tools[%d]: a port is for the http transport", i)
			}
		case TransportHTTP:
			if s.Port <= 0 || s.Port > 65535 {
				return fmt.Errorf("tools[%d]: the http transport needs a port", i)
			}
			if s.Path != "" && !strings.HasPrefix(s.Path, "/") {
				return fmt.Errorf("tools[%d]: path must start with /", i)
			}
		default:
			return fmt.Errorf("tools[%d]: transport must be stdio or http", i)
		}
	}
	if user == nil {
		return nil
	}
	switch {
	case (len(user.Command) > 0) == (user.Persona != ""):
		return errors.New(`user: set exactly one of "command" and "persona"`)
	case len(user.Command) > 0 && user.Command[0] == "":
		return errors.New("user: empty command")
	case user.MaxTurns < 0:
		return errors.New("user: max_turns must not be negative")
	}
	return nil
}

// toolsFromTOML reads task.toml's [[tools]] and [user] out of doc (a
// decoded task.toml) and removes them from it.
func toolsFromTOML(doc map[string]any, t *Task) error {
	if raw, ok := doc["tools"]; ok {
		if err := viaJSON(raw, &t.Tools); err != nil {
			return errors.New("[[tools]] must be tables of name, command, env, transport, port, path")
		}
		delete(doc, "tools")
	}
	if env, ok := doc["environment"].(map[string]any); ok {
		if raw, ok := env["mcp_servers"]; ok {
			servers, err := harborMCPServers(raw)
			if err != nil {
				return err
			}
			t.Tools = append(t.Tools, servers...)
			delete(env, "mcp_servers")
		}
	}
	if raw, ok := doc["user"]; ok {
		var u User
		if err := viaJSON(raw, &u); err != nil {
			return errors.New("[user] must be a table of command or persona, and max_turns")
		}
		t.User = &u
		delete(doc, "user")
	}
	return checkTools(t.Tools, t.User)
}

func viaJSON(v any, dst any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// harborMCPServers reads Harbor's [[environment.mcp_servers]]: a stdio
// server (command and args) is a tool server the harness starts beside
// itself, as [[tools]] are. A server Harbor reaches by URL (sse,
// streamable-http) runs in a container of its own under Docker Compose,
// which no runtime here starts: it is refused with the server named.
func harborMCPServers(raw any) ([]ToolServer, error) {
	var servers []struct {
		Name      string            `json:"name"`
		Transport string            `json:"transport"`
		Command   string            `json:"command"`
		Args      []string          `json:"args"`
		Env       map[string]string `json:"env"`
		URL       string            `json:"url"`
	}
	if err := viaJSON(raw, &servers); err != nil {
		return nil, errors.New("[[environment.mcp_servers]] must be tables of name, transport, command, args, env, url")
	}
	var out []ToolServer
	for _, s := range servers {
		switch {
		case s.Transport != "" && s.Transport != TransportStdio:
			return nil, fmt.Errorf("[[environment.mcp_servers]] %q: transport %q (at %s) needs a server of its own that no runtime here starts; only stdio servers are run", s.Name, s.Transport, s.URL)
		case s.Command == "":
			return nil, fmt.Errorf("[[environment.mcp_servers]] %q: a stdio server needs a command", s.Name)
		}
		out = append(out, ToolServer{Name: s.Name, Command: append([]string{s.Command}, s.Args...), Env: s.Env})
	}
	return out, nil
}
