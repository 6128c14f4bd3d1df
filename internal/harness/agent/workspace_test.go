package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/harness/agent"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/tasksets"
)

// asAgent, set in a subprocess's environment, makes the test binary run the
// agent on its arguments instead of the tests.
const asAgent = "EVALFLOW_TEST_RUN_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(asAgent) == "1" {
		os.Exit(agent.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const script = "testdata/script.jsonl"

// toolResults reads the tool results of a recorded request, as the model
// sees them.
func toolResults(t *testing.T, d dialects.Dialect, r recorded) []string {
	t.Helper()
	req, err := d.ParseRequest(r.raw)
	require.NoError(t, err)
	var out []string
	for _, m := range req.Messages {
		if m.Role == dialects.RoleTool {
			out = append(out, m.Text())
		}
	}
	return out
}

func TestWorkspaceTools(t *testing.T) {
	for _, d := range []dialects.Dialect{dialects.Chat, dialects.Responses, dialects.Anthropic} {
		for _, args := range [][]string{nil, {"--no-stream"}} {
			t.Run(strings.Join(append([]string{d.Name()}, args...), " "), func(t *testing.T) {
				rec, answerFile := setup(t, mock.Config{Script: script},
					tasksets.Task{ID: "greet", Prompt: "Task greet: leave a note in the workspace."})
				ws := t.TempDir()
				t.Setenv("EVALFLOW_WORKSPACE", ws)

				code, stdout, stderr := run(t, append([]string{"--dialect", d.Name()}, args...)...)
				require.Equal(t, agent.ExitOK, code, "stderr: %s", stderr)

				note, err := os.ReadFile(filepath.Join(ws, "notes", "hello.txt"))
				require.NoError(t, err, "write_file wrote into the workspace")
				assert.Equal(t, "hello from the agent\n", string(note))
				answer, err := os.ReadFile(answerFile)
				require.NoError(t, err)
				assert.Equal(t, "greeted", string(answer))
				assert.Equal(t, "turn 1: write_file -> wrote 21 bytes to notes/hello.txt\n"+
					"turn 2: shell -> exit code: 0; read_file -> error: read_file: missing.txt does not e...\n"+
					"turn 3: answer (7 chars)\n", stdout)

				reqs := rec.requests()
				require.Len(t, reqs, 3)
				assert.Equal(t, []string{"wrote 21 bytes to notes/hello.txt"}, toolResults(t, d, reqs[1]))
				assert.Equal(t, []string{
					"wrote 21 bytes to notes/hello.txt",
					"exit code: 0\nhello from the agent\nin " + ws + "\n",
					"error: read_file: missing.txt does not exist",
				}, toolResults(t, d, reqs[2]), "the model reads the shell's output and the failed read")
				if d == dialects.Anthropic {
					assert.Contains(t, string(reqs[2].raw), `"is_error":true`, "a failed tool call is marked")
				}
			})
		}
	}
}

func TestToolsOfferedInEveryDialect(t *testing.T) {
	want := []string{"shell", "read_file", "write_file", "calculator"}
	for _, d := range []dialects.Dialect{dialects.Chat, dialects.Responses, dialects.Anthropic} {
		rec, _ := setup(t, mock.Config{}, tasksets.Task{ID: "t1", Prompt: "What is 6 * 7?"})
		code, _, stderr := run(t, "--dialect", d.Name(), "--no-stream")
		require.Equal(t, agent.ExitOK, code, "stderr: %s", stderr)
		req, err := d.ParseRequest(rec.requests()[0].raw)
		require.NoError(t, err)
		var names []string
		schemas := map[string]string{}
		for _, tool := range req.Tools {
			names = append(names, tool.Name)
			schemas[tool.Name] = string(tool.Parameters)
		}
		assert.Equal(t, want, names, d.Name())
		assert.JSONEq(t, `{"type":"object","properties":{"path":{"type":"string","description":"relative to the workspace, or absolute"},`+
			`"content":{"type":"string","description":"the whole new content of the file"}},"required":["path","content"]}`,
			schemas["write_file"], d.Name())
	}
}

func TestBadToolSettings(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"timeout", map[string]string{"EVALFLOW_TOOL_TIMEOUT": "soon"}, nil, `EVALFLOW_TOOL_TIMEOUT: "soon"`},
		{"timeout flag", nil, []string{"--tool-timeout", "0"}, `invalid value "0" for flag -tool-timeout`},
		{"output limit", map[string]string{"EVALFLOW_TOOL_OUTPUT_LIMIT": "x"}, nil, `EVALFLOW_TOOL_OUTPUT_LIMIT: "x"`},
		{"workspace", map[string]string{"EVALFLOW_WORKSPACE": "/nonexistent/ws"}, nil, `EVALFLOW_WORKSPACE="/nonexistent/ws" is not a directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := setup(t, mock.Config{}, tasksets.Task{ID: "t1", Prompt: "What is 1 + 1?"})
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, _, stderr := run(t, tt.args...)
			assert.Equal(t, agent.ExitError, code)
			assert.Contains(t, stderr, tt.want)
			assert.Empty(t, rec.requests(), "no model call with bad tool settings")
		})
	}
}

// TestAgentDeathKillsItsCommand runs the agent as a process of its own, in
// the workspace as its working directory, kills it with SIGKILL while a
// command runs, and checks the command's background child dies too.
func TestAgentDeathKillsItsCommand(t *testing.T) {
	_, _ = setup(t, mock.Config{Script: script}, tasksets.Task{ID: "linger", Prompt: "Task linger: start something slow."})
	ws := t.TempDir()
	t.Setenv("EVALFLOW_WORKSPACE", "")
	fifo := filepath.Join(ws, "pid.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// Opened for reading and writing, the FIFO never blocks its opener and
	// never reads as ended.
	pipe, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	defer pipe.Close()

	cmd := exec.Command(os.Args[0], "--max-retries=0")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), asAgent+"=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pipe).ReadString('\n')
		line <- s
	}()
	var pid int
	select {
	case s := <-line:
		pid, err = strconv.Atoi(strings.TrimSpace(s))
		require.NoError(t, err, "pid line %q", s)
	case err := <-exited:
		t.Fatalf("the agent exited (%v) before its command ran: %s", err, out.String())
	}
	require.True(t, alive(pid), "the command's child runs")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	assert.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond,
		"the command's child %d outlived the agent", pid)
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
}
