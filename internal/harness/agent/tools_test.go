package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTools(t *testing.T) *tools {
	t.Helper()
	return &tools{workspace: t.TempDir(), timeout: time.Minute, outputLimit: DefaultToolOutputLimit, env: os.Environ()}
}

func TestRunTool(t *testing.T) {
	tb := newTools(t)
	require.NoError(t, os.WriteFile(filepath.Join(tb.workspace, "notes.txt"), []byte("remember the milk\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(tb.workspace, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tb.workspace, "big.log"), make([]byte, readLimit+1), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tb.workspace, "blob.bin"), []byte{0xff, 0xfe, 0}, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tb.workspace, "empty"), nil, 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(tb.workspace, "fifo"), 0o644))
	tests := []struct {
		name, args, want string
		isError          bool
	}{
		{"calculator", `{"expression":"37 * (12 + 5)"}`, "629", false},
		{"calculator", `{"expression":"1 / 4"}`, "0.25", false},
		{"calculator", `{"expression":"1 / 0"}`, "error: division by zero", true},
		{"calculator", `{"expression":"rm -rf /"}`, "error: unexpected character", true},
		{"calculator", `not json`, "error: arguments are not valid JSON for this tool", true},
		{"browser", `{}`, `error: unknown tool "browser"`, true},
		{"shell", `{"command":"echo hi; echo oops >&2; exit 3"}`, "exit code: 3\nhi\noops\n", false},
		{"shell", `{"command":"pwd"}`, "exit code: 0\n" + tb.workspace + "\n", false},
		{"shell", `{"command":"true"}`, "exit code: 0 (no output)", false},
		{"shell", `{"command":"kill -TERM $$"}`, "killed by signal terminated (no output)", false},
		{"shell", `{"command":"echo $OPENAI_API_KEY$ANTHROPIC_API_KEY."}`, "exit code: 0\n.\n", false},
		{"shell", `{"command":"cat"}`, "exit code: 0 (no output)", false},
		{"shell", `{}`, `error: shell: "command" is required`, true},
		{"shell", `{"command":["ls"]}`, "error: arguments are not valid JSON for this tool", true},
		{"read_file", `{"path":"notes.txt"}`, "remember the milk\n", false},
		{"read_file", `{"path":"` + filepath.Join(tb.workspace, "notes.txt") + `"}`, "remember the milk\n", false},
		{"read_file", `{"path":"missing.txt"}`, "error: read_file: missing.txt does not exist", true},
		{"read_file", `{"path":"sub"}`, "error: read_file: sub is a directory", true},
		{"read_file", `{"path":"fifo"}`, "error: read_file: fifo is not a regular file", true},
		{"read_file", `{"path":"big.log"}`, fmt.Sprintf("error: read_file: big.log is %d bytes, more than the %d", readLimit+1, readLimit), true},
		{"read_file", `{"path":"blob.bin"}`, "error: read_file: blob.bin is not UTF-8 text", true},
		{"read_file", `{"path":"empty"}`, "(empty file)", false},
		{"read_file", `{}`, `error: read_file: "path" is required`, true},
		{"write_file", `{"path":"a/b/c.txt","content":"deep\n"}`, "wrote 5 bytes to a/b/c.txt", false},
		{"write_file", `{"path":"empty.txt","content":""}`, "wrote 0 bytes to empty.txt", false},
		{"write_file", `{"path":"x.txt"}`, `error: write_file: "path" and "content" are required`, true},
		{"write_file", `{"path":"notes.txt/inside","content":"x"}`, "error: write_file: mkdir", true},
	}
	for _, tt := range tests {
		got := tb.run(context.Background(), tt.name, tt.args)
		if tt.isError {
			assert.True(t, strings.HasPrefix(got.text, tt.want), "run(%q, %q) = %q, want a prefix %q", tt.name, tt.args, got.text, tt.want)
		} else {
			assert.Equal(t, tt.want, got.text, "run(%q, %q)", tt.name, tt.args)
		}
		assert.Equal(t, tt.isError, got.isError, "run(%q, %q) = %q: isError", tt.name, tt.args, got.text)
	}
	data, err := os.ReadFile(filepath.Join(tb.workspace, "a/b/c.txt"))
	require.NoError(t, err)
	assert.Equal(t, "deep\n", string(data))
}

func TestWriteFileKeepsMode(t *testing.T) {
	tb := newTools(t)
	script := filepath.Join(tb.workspace, "run.sh")
	require.NoError(t, os.WriteFile(script, []byte("old"), 0o755))
	got := tb.run(context.Background(), "write_file", `{"path":"run.sh","content":"echo new"}`)
	require.False(t, got.isError, got.text)
	fi, err := os.Stat(script)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}

// alive reports whether pid is a process that has not exited.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "Z" is a zombie.
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
}

// pids returns the numbers on lines of out that are only a number.
func pids(t *testing.T, out string) []int {
	t.Helper()
	var found []int
	for _, line := range strings.Split(out, "\n") {
		if n, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			found = append(found, n)
		}
	}
	return found
}

func TestShellTimeoutKillsTheGroup(t *testing.T) {
	tb := newTools(t)
	tb.timeout = time.Second
	start := time.Now()
	// A child, a grandchild in a subshell, and the shell waiting for them.
	got := tb.run(context.Background(), "shell",
		`{"command":"sleep 1000 & echo $!; (sleep 1000 & echo $!; wait) & wait"}`)
	assert.Less(t, time.Since(start), 30*time.Second)
	assert.True(t, got.isError)
	assert.True(t, strings.HasPrefix(got.text, "error: timed out after 1s; the command and its processes were killed\n"), got.text)
	children := pids(t, got.text)
	require.Len(t, children, 2, "the output before the timeout is kept: %q", got.text)
	for _, pid := range children {
		assert.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond, "process %d survived the timeout", pid)
	}
}

func TestShellKillsWhatItLeavesBehind(t *testing.T) {
	tb := newTools(t)
	got := tb.run(context.Background(), "shell", `{"command":"sleep 1000 & echo $!"}`)
	require.False(t, got.isError, got.text)
	assert.True(t, strings.HasPrefix(got.text, "exit code: 0\n"), got.text)
	children := pids(t, got.text)
	require.Len(t, children, 1, got.text)
	assert.Eventually(t, func() bool { return !alive(children[0]) }, 10*time.Second, 10*time.Millisecond,
		"a background process outlived its command")
}

func TestShellOutputKeepsHeadAndTail(t *testing.T) {
	tb := newTools(t)
	tb.outputLimit = 1000
	got := tb.run(context.Background(), "shell", `{"command":"seq 1 100000"}`)
	require.False(t, got.isError, got.text)
	all := seqOutput(100000)
	out, ok := strings.CutPrefix(got.text, "exit code: 0\n")
	require.True(t, ok, got.text)
	head, rest, ok := strings.Cut(out, "[… ")
	require.True(t, ok, "no cut marker in %q", out)
	if !strings.HasPrefix(all, head) {
		head = strings.TrimSuffix(head, "\n") // the line break before the marker
	}
	assert.True(t, strings.HasPrefix(all, head), "the head is not the start of the output: %q", head)
	assert.True(t, strings.HasPrefix(head, "1\n2\n3\n"), head)
	cut, tail, ok := strings.Cut(rest, " bytes cut …]\n")
	require.True(t, ok, rest)
	assert.True(t, strings.HasSuffix(all, tail), "the tail is not the end of the output: %q", tail)
	assert.True(t, strings.HasSuffix(tail, "99999\n100000\n"), tail)
	n, err := strconv.Atoi(cut)
	require.NoError(t, err)
	assert.Equal(t, len(all), len(head)+n+len(tail), "head + cut + tail = all the output")
	assert.Equal(t, 1000, len(head)+len(tail), "the limit is used in full for ASCII")
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

func TestClipped(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		limit  int
		want   string
	}{
		{"fits", []string{"hello ", "world"}, 11, "hello world"},
		{"empty", nil, 10, ""},
		{"cut", []string{"0123456789"}, 6, "012\n[… 4 bytes cut …]\n789"},
		{"cut across writes", []string{"01", "234", "5678", "9"}, 6, "012\n[… 4 bytes cut …]\n789"},
		{"head ends a line", []string{"ab\ncdefgh\nij"}, 6, "ab\n[… 6 bytes cut …]\n\nij"},
		{"no rune split", []string{"aé", "xxxxxxxx", "éb"}, 4, "a\n[… 12 bytes cut …]\nb"},
		{"long tail trimmed", []string{strings.Repeat("x", 50), strings.Repeat("y", 50)}, 10, "xxxxx\n[… 90 bytes cut …]\nyyyyy"},
	}
	for _, tt := range tests {
		c := newClipped(tt.limit)
		for _, w := range tt.writes {
			n, err := c.Write([]byte(w))
			require.NoError(t, err)
			require.Equal(t, len(w), n)
		}
		assert.Equal(t, tt.want, c.String(), tt.name)
	}
}

func TestToolOptions(t *testing.T) {
	tests := []struct {
		timeout, limit string
		want           toolOptions
		err            string
	}{
		{"", "", toolOptions{DefaultToolTimeout, DefaultToolOutputLimit}, ""},
		{"90s", "4096", toolOptions{90 * time.Second, 4096}, ""},
		{"2.5", "", toolOptions{2500 * time.Millisecond, DefaultToolOutputLimit}, ""},
		{"soon", "", toolOptions{}, `EVALFLOW_TOOL_TIMEOUT: "soon" is neither a duration`},
		{"-1s", "", toolOptions{}, `EVALFLOW_TOOL_TIMEOUT: "-1s" is not a positive time`},
		{"", "10", toolOptions{}, `EVALFLOW_TOOL_OUTPUT_LIMIT: "10" is not a number of bytes of at least 64`},
	}
	for _, tt := range tests {
		t.Setenv("EVALFLOW_TOOL_TIMEOUT", tt.timeout)
		t.Setenv("EVALFLOW_TOOL_OUTPUT_LIMIT", tt.limit)
		got, err := toolOptionsFromEnv()
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, "timeout %q, limit %q", tt.timeout, tt.limit)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "timeout %q, limit %q", tt.timeout, tt.limit)
	}
}
