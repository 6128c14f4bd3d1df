package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/evalflow/evalflow/tasksets"
)

// rolloutSecretEnv holds the rollout's secret for the task's tool servers
// and user (harness.RolloutSecretEnv); shell commands never see it.
const rolloutSecretEnv = "EVALFLOW_ROLLOUT_SECRET"

// serverStartTimeout bounds the wait for an HTTP tool server's port.
const serverStartTimeout = 30 * time.Second

// mcpTools are the tools of a task's MCP servers, offered to the model as
// SERVER__TOOL and called through the official MCP SDK. The agent is the
// servers' client: it starts a stdio server's command itself, and an HTTP
// server's command beside it, and stops both when it ends.
type mcpTools struct {
	sessions []*mcp.ClientSession
	procs    []*exec.Cmd // HTTP servers' commands
	byName   map[string]mcpTool
	specs    []toolSpec
}

// mcpTool is one tool of a server.
type mcpTool struct {
	session *mcp.ClientSession
	name    string
}

// startMCP connects to every tool server of a task and lists their tools.
// env is the servers' environment; their stderr goes to log.
func startMCP(ctx context.Context, servers []tasksets.ToolServer, env []string, log io.Writer) (*mcpTools, error) {
	m := &mcpTools{byName: map[string]mcpTool{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "evalflow-agent", Version: "1"}, nil)
	for _, s := range servers {
		if err := m.connect(ctx, client, s, env, log); err != nil {
			_ = m.close()
			return nil, fmt.Errorf("tool server %s: %w", s.Name, err)
		}
	}
	return m, nil
}

func (m *mcpTools) connect(ctx context.Context, client *mcp.Client, s tasksets.ToolServer, env []string, log io.Writer) error {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Env = env
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = log
	var transport mcp.Transport
	if s.Transport == tasksets.TransportHTTP {
		if err := cmd.Start(); err != nil {
			return err
		}
		m.procs = append(m.procs, cmd)
		if err := waitPort(ctx, cmd, s.Port); err != nil {
			return err
		}
		transport = &mcp.StreamableClientTransport{Endpoint: s.URL(), DisableStandaloneSSE: true}
	} else {
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return err
	}
	m.sessions = append(m.sessions, cs)
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		name := modelToolName(s.Name, tool.Name)
		m.byName[name] = mcpTool{session: cs, name: tool.Name}
		m.specs = append(m.specs, toolSpec{name: name, description: tool.Description, parameters: inputSchema(tool.InputSchema)})
	}
	return nil
}

// waitPort waits until an HTTP tool server accepts connections on port, or
// its command exits.
func waitPort(ctx context.Context, cmd *exec.Cmd, port int) error {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil // the goroutine above reaps the command when close kills it
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before listening on port %d: %v", port, err)
		case <-ctx.Done():
			return fmt.Errorf("not listening on port %d after %s", port, serverStartTimeout)
		case <-tick.C:
		}
	}
}

var unsafeToolChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// modelToolName is SERVER__TOOL in the characters every dialect accepts
// in a tool's name, at most 64 of them.
func modelToolName(server, tool string) string {
	name := server + "__" + unsafeToolChars.ReplaceAllString(tool, "_")
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// inputSchema is a tool's input schema as a JSON object schema.
func inputSchema(schema any) map[string]any {
	var obj map[string]any
	if b, err := json.Marshal(schema); err == nil {
		_ = json.Unmarshal(b, &obj)
	}
	if obj == nil {
		obj = map[string]any{}
	}
	obj["type"] = "object"
	if _, ok := obj["properties"]; !ok {
		obj["properties"] = map[string]any{}
	}
	return obj
}

// call calls a tool of a server; ok is false when no server has it.
func (m *mcpTools) call(ctx context.Context, name, arguments string) (result, bool) {
	if m == nil {
		return result{}, false
	}
	t, ok := m.byName[name]
	if !ok {
		return result{}, false
	}
	var args map[string]any
	if strings.TrimSpace(arguments) != "" {
		if err := json.Unmarshal([]byte(arguments), &args); err != nil {
			return failed("arguments are not a JSON object: %v", err), true
		}
	}
	res, err := t.session.CallTool(ctx, &mcp.CallToolParams{Name: t.name, Arguments: args})
	if err != nil {
		return failed("%s: %v", name, err), true
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return result{text: strings.Join(parts, "\n"), isError: res.IsError}, true
}

// close ends every session (a stdio server's stdin is closed, then it is
// terminated) and kills the HTTP servers' commands.
func (m *mcpTools) close() error {
	if m == nil {
		return nil
	}
	var errs []error
	for _, cs := range m.sessions {
		if err := cs.Close(); err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, err)
		}
	}
	for _, p := range m.procs {
		if err := p.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, err)
		}
	}
	m.sessions, m.procs = nil, nil
	return errors.Join(errs...)
}

// offer adds the servers' tools to what a session offers the model.
func (m *mcpTools) offer(s session) {
	if m == nil {
		return
	}
	for _, t := range m.specs {
		switch s := s.(type) {
		case *chatSession:
			s.params.Tools = append(s.params.Tools, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
				Name: t.name, Description: openai.String(t.description), Parameters: t.parameters,
			}))
		case *responsesSession:
			s.params.Tools = append(s.params.Tools, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
				Name: t.name, Description: openai.String(t.description), Parameters: t.parameters, Strict: openai.Bool(false),
			}})
		case *anthropicSession:
			schema := anthropic.ToolInputSchemaParam{Properties: t.parameters["properties"]}
			if req, ok := t.parameters["required"].([]any); ok {
				for _, r := range req {
					if name, ok := r.(string); ok {
						schema.Required = append(schema.Required, name)
					}
				}
			}
			s.params.Tools = append(s.params.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
				Name: t.name, Description: anthropic.String(t.description), InputSchema: schema,
			}})
		}
	}
}

// sideEnv is the environment of a task's tool servers and user: the
// agent's own without its model keys (the secret they need is in
// EVALFLOW_ROLLOUT_SECRET).
func sideEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "OPENAI_API_KEY" || name == "ANTHROPIC_API_KEY" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
