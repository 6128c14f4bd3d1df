package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults of the tools' limits.
const (
	// DefaultToolTimeout bounds one shell command.
	DefaultToolTimeout = 60 * time.Second
	// DefaultToolOutputLimit bounds the output of one shell command the
	// model reads: its head and tail are kept.
	DefaultToolOutputLimit = 16 << 10
	// readLimit is the largest file read_file returns.
	readLimit = 256 << 10
)

// toolSpec is a tool as every dialect offers it: a name, what it does and
// the JSON schema of its arguments.
type toolSpec struct {
	name, description string
	parameters        map[string]any
}

// toolSpecs are the tools the agent offers, in every dialect, whatever the
// task: a task that needs none simply never calls them.
var toolSpecs = []toolSpec{
	{
		name: "shell",
		description: "Run a command line with sh -c in the workspace and return its exit code and " +
			"output (stdout and stderr together; long output keeps its head and tail). " +
			"The command is killed if it runs too long; processes it leaves in the background " +
			"are killed when it returns.",
		parameters: object(map[string]any{
			"command": map[string]any{"type": "string", "description": "the command line, for example: ls -la"},
		}, "command"),
	},
	{
		name:        "read_file",
		description: "Read a text file.",
		parameters: object(map[string]any{
			"path": map[string]any{"type": "string", "description": "relative to the workspace, or absolute"},
		}, "path"),
	},
	{
		name:        "write_file",
		description: "Write a text file, replacing it if it exists; missing parent directories are created.",
		parameters: object(map[string]any{
			"path":    map[string]any{"type": "string", "description": "relative to the workspace, or absolute"},
			"content": map[string]any{"type": "string", "description": "the whole new content of the file"},
		}, "path", "content"),
	},
	{
		name:        "calculator",
		description: "Evaluate an arithmetic expression with + - * / and parentheses.",
		parameters: object(map[string]any{
			"expression": map[string]any{"type": "string", "description": "for example 37 * (12 + 5)"},
		}, "expression"),
	},
}

func object(properties map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": properties, "required": required}
}

// result is what a tool call returns to the model. An error (bad
// arguments, a missing file, a timeout) is a result too, marked for the
// dialects that can say so; it never stops the agent.
type result struct {
	text    string
	isError bool
}

func failed(format string, args ...any) result {
	return result{text: "error: " + fmt.Sprintf(format, args...), isError: true}
}

// tools runs the tools' calls in a workspace.
type tools struct {
	// workspace is the absolute directory commands run in and relative
	// paths are resolved against.
	workspace string
	// timeout bounds each shell command; outputLimit its output.
	timeout     time.Duration
	outputLimit int
	// env is the commands' environment.
	env []string
	// mcp are the task's tool servers; nil for none.
	mcp *mcpTools
}

// run executes one tool call.
func (tb *tools) run(ctx context.Context, name, arguments string) result {
	switch name {
	case "shell":
		var args struct {
			Command string `json:"command"`
		}
		if r, ok := decode(arguments, &args); !ok {
			return r
		}
		if strings.TrimSpace(args.Command) == "" {
			return failed(`shell: "command" is required`)
		}
		return tb.shell(ctx, args.Command)
	case "read_file":
		var args struct {
			Path string `json:"path"`
		}
		if r, ok := decode(arguments, &args); !ok {
			return r
		}
		if args.Path == "" {
			return failed(`read_file: "path" is required`)
		}
		return tb.readFile(args.Path)
	case "write_file":
		var args struct {
			Path    string  `json:"path"`
			Content *string `json:"content"`
		}
		if r, ok := decode(arguments, &args); !ok {
			return r
		}
		if args.Path == "" || args.Content == nil {
			return failed(`write_file: "path" and "content" are required`)
		}
		return tb.writeFile(args.Path, *args.Content)
	case "calculator":
		var args struct {
			Expression string `json:"expression"`
		}
		if r, ok := decode(arguments, &args); !ok {
			return r
		}
		return calculate(args.Expression)
	}
	if r, ok := tb.mcp.call(ctx, name, arguments); ok {
		return r
	}
	return failed("unknown tool %q", name)
}

// decode reads a call's arguments into v; a failure is the call's result.
func decode(arguments string, v any) (result, bool) {
	if err := json.Unmarshal([]byte(arguments), v); err != nil {
		return failed("arguments are not valid JSON for this tool: %v", err), false
	}
	return result{}, true
}

// resolve makes path absolute, relative to the workspace.
func (tb *tools) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(tb.workspace, path)
}

// toolOptions are the tools' settings: the flags, defaulting to the
// environment.
type toolOptions struct {
	timeout     time.Duration
	outputLimit int
}

// toolOptionsFromEnv reads EVALFLOW_TOOL_TIMEOUT and
// EVALFLOW_TOOL_OUTPUT_LIMIT over the defaults.
func toolOptionsFromEnv() (toolOptions, error) {
	o := toolOptions{timeout: DefaultToolTimeout, outputLimit: DefaultToolOutputLimit}
	if s := os.Getenv("EVALFLOW_TOOL_TIMEOUT"); s != "" {
		if err := o.setTimeout(s); err != nil {
			return o, fmt.Errorf("EVALFLOW_TOOL_TIMEOUT: %w", err)
		}
	}
	if s := os.Getenv("EVALFLOW_TOOL_OUTPUT_LIMIT"); s != "" {
		if err := o.setOutputLimit(s); err != nil {
			return o, fmt.Errorf("EVALFLOW_TOOL_OUTPUT_LIMIT: %w", err)
		}
	}
	return o, nil
}

// setTimeout reads a duration ("90s", "2m") or a number of seconds.
func (o *toolOptions) setTimeout(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return fmt.Errorf("%q is neither a duration (90s) nor seconds", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return fmt.Errorf("%q is not a positive time", s)
	}
	o.timeout = d
	return nil
}

// setOutputLimit reads a number of bytes, at least 64 so the marker of a
// cut fits.
func (o *toolOptions) setOutputLimit(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 64 {
		return fmt.Errorf("%q is not a number of bytes of at least 64", s)
	}
	o.outputLimit = n
	return nil
}

// workspace returns the absolute directory the tools work in:
// EVALFLOW_WORKSPACE, else the working directory.
func workspace() (string, error) {
	dir := os.Getenv("EVALFLOW_WORKSPACE")
	if dir == "" {
		return os.Getwd()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("EVALFLOW_WORKSPACE: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("EVALFLOW_WORKSPACE=%q is not a directory", dir)
	}
	return abs, nil
}

// commandEnv is the environment of shell commands: the agent's, without
// the keys it calls the model with and the secret of its tool servers.
func commandEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "OPENAI_API_KEY" || name == "ANTHROPIC_API_KEY" || name == rolloutSecretEnv {
			continue
		}
		env = append(env, kv)
	}
	return env
}
