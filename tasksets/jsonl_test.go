package tasksets

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestJSONLLargeFileIsIndexed(t *testing.T) {
	const n = 100_000
	path := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, `{"id":"t%d","prompt":"What is %d + 1?","answer":"%d"}`+"\n", i, i, i+1)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())

	ts, err := OpenFile(path)
	require.NoError(t, err)
	defer ts.Close()
	require.Equal(t, int64(n), ts.Len())

	// The last task is read from the file on demand: rewriting its bytes in
	// place after opening changes what Task returns, so nothing was cached.
	got, err := ts.Task(context.Background(), n-1)
	require.NoError(t, err)
	assert.Equal(t, Task{ID: "t99999", Prompt: "What is 99999 + 1?", Answer: "100000"}, got)

	rw, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	st, err := rw.Stat()
	require.NoError(t, err)
	// `"answer":"100000"}` + "\n": overwrite the last digit of the answer.
	_, err = rw.WriteAt([]byte("7"), st.Size()-4)
	require.NoError(t, err)
	require.NoError(t, rw.Close())

	got, err = ts.Task(context.Background(), n-1)
	require.NoError(t, err)
	assert.Equal(t, "100007", got.Answer, "Task(%d) should reread the file", n-1)

	got, err = ts.Task(context.Background(), 12345)
	require.NoError(t, err)
	assert.Equal(t, "t12345", got.ID)
}

func TestJSONLBlankLinesAndIDs(t *testing.T) {
	path := writeFile(t, "tasks.jsonl", "\n"+
		`{"id": 7, "prompt": "a", "answer": 42}`+"\n"+
		"   \n"+
		`{"id": "x", "messages": [{"role": "user", "content": "hi"}], "info": {"k": 1}}`+"\r\n"+
		`{"id": 1.5, "prompt": "b"}`) // no trailing newline
	ts, err := OpenFile(path)
	require.NoError(t, err)
	defer ts.Close()
	require.Equal(t, int64(3), ts.Len())

	want := []Task{
		{ID: "7", Prompt: "a", Answer: "42"},
		{ID: "x", Messages: []Message{{Role: "user", Content: "hi"}}, Info: []byte(`{"k": 1}`)},
		{ID: "1.5", Prompt: "b"},
	}
	for i, w := range want {
		got, err := ts.Task(context.Background(), int64(i))
		require.NoError(t, err)
		assert.Equal(t, w, got, "Task(%d)", i)
	}
}

func TestJSONLErrors(t *testing.T) {
	ok := `{"id":"a","prompt":"p"}`
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"bad json", ok + "\n\n" + `{"id":"b","prompt":}`, "tasks.jsonl:3: offset 19: invalid JSON: expected a value"},
		{"bad json after space", "  \t" + `{"id" "b"}`, "tasks.jsonl:1: offset 9: invalid JSON: expected ':' after a key"},
		{"unterminated", `{"id":"b","prompt":"p`, "tasks.jsonl:1: offset 21: invalid JSON: the line ends inside a value"},
		{"not object", ok + "\n[1,2]", "tasks.jsonl:2: offset 0: not a JSON object"},
		{"no id", `{"prompt":"p"}`, `tasks.jsonl:1: "id" must be`},
		{"bool id", `{"id":true,"prompt":"p"}`, `tasks.jsonl:1: "id" must be`},
		{"no prompt", ok + "\n" + `{"id":"b"}`, `tasks.jsonl:2: task has neither "prompt" nor "messages"`},
		{"bad prompt type", `{"id":"b","prompt":3}`, `tasks.jsonl:1: invalid task: "prompt" must be a string, not a number`},
		{"bad messages type", `{"id":"b","messages":{}}`, `tasks.jsonl:1: invalid task: "messages" must be an array, not an object`},
		{"message without role", `{"id":"b","messages":[{"content":"x"}]}`, `tasks.jsonl:1: messages[0] has no "role"`},
		{"duplicate", ok + "\n" + `{"id":"b","prompt":"p"}` + "\n" + ok, "tasks.jsonl:3: duplicate id (first on line 1)"},
		{"duplicate number and string", `{"id":5,"prompt":"p"}` + "\n" + `{"id":"5","prompt":"p"}`, "tasks.jsonl:2: duplicate id (first on line 1)"},
		{"empty", "\n  \n", "tasks.jsonl: no tasks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "tasks.jsonl", tt.content)
			_, err := OpenFile(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), path), "error %q should start with the path", err)
		})
	}
}

// TestJSONLErrorsHideContent holds errors to naming the line and the
// problem: they reach workflow histories, so no byte of a file that is not
// a taskset (a password file, a key) may travel in them. Every line holds
// the marker Q where the problem is or around it.
func TestJSONLErrorsHideContent(t *testing.T) {
	lines := []string{
		"root:x:0:0:Q:/root:/bin/bash",
		`{"id":Q}`,
		`{"idQ" 1}`,
		`{"id":"Q" "prompt"}`,
		`{"id":["Q" "x"]}`,
		`{"id":"Q","prompt":"Q`,
		`{"id":"\Q"}`,
		`{"id":"\uQQQQ"}`,
		`{"id":1.Q}`,
		`{"id":1eQ}`,
		`{"id":-Q}`,
		`{"id":tQ}`,
		`{'Q':1}`,
		`{"id":"a","prompt":"p"} Q`,
		"{\"id\":\"Q\x01\"}",
		`{"id":"a","prompt":"p","messages":"Q"}`,
		`{"id":"a","prompt":"p","messages":[{"role":["Q"]}]}`,
		`{"id":["Q"],"prompt":"p"}`,
		`{"id":"a","prompt":"p","answer":{"Q":1}}`,
		`{"id":"Q","prompt":"p"}` + "\n" + `{"id":"Q","prompt":"p"}`,
	}
	for _, content := range lines {
		path := writeFile(t, "tasks.jsonl", content)
		_, err := OpenFile(path)
		require.Error(t, err, "OpenFile(%q)", content)
		msg := strings.TrimPrefix(err.Error(), path)
		assert.NotEqual(t, err.Error(), msg, "error %q should start with the path", err)
		assert.NotContains(t, msg, "Q", "OpenFile(%q) error quotes the file", content)
		assert.NotContains(t, msg, "root", "OpenFile(%q) error quotes the file", content)
		assert.NotContains(t, msg, "x01", "OpenFile(%q) error quotes the file", content)
		assert.NotContains(t, msg, "\x01", "OpenFile(%q) error quotes the file", content)
	}
}

// TestOpenFileRefusesSpecialFiles: only a regular file is read. A FIFO
// would block the worker on open (waiting for a writer) and a device could
// stream forever, so both are refused, promptly, naming what they are.
func TestOpenFileRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "tasks.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	fifoLink := filepath.Join(dir, "link.jsonl")
	require.NoError(t, os.Symlink(fifo, fifoLink))
	sock := filepath.Join(dir, "s.jsonl")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()

	tests := []struct {
		path string
		want string
	}{
		{fifo, "is a named pipe (FIFO)"},
		{fifoLink, "is a named pipe (FIFO)"},
		{"/dev/null", "is a character device"},
		{"/dev/zero", "is a character device"},
		{sock, "is a socket"},
		{dir, "is a directory"},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() {
			ts, err := OpenFile(tt.path)
			if err == nil {
				ts.Close()
			}
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
		}, 5*time.Second, 5*time.Millisecond, "OpenFile(%q) blocked", tt.path)
		require.Error(t, err, "OpenFile(%q)", tt.path)
		assert.ErrorIs(t, err, ErrNotRegular, "OpenFile(%q)", tt.path)
		assert.Contains(t, err.Error(), tt.path+" "+tt.want, "OpenFile(%q)", tt.path)
	}
}

// TestOpenFileFollowsSymlinkToRegularFile: a link to a task file is fine.
func TestOpenFileFollowsSymlinkToRegularFile(t *testing.T) {
	target := writeFile(t, "tasks.jsonl", `{"id":"a","prompt":"p"}`)
	link := filepath.Join(t.TempDir(), "link.jsonl")
	require.NoError(t, os.Symlink(target, link))
	ts, err := OpenFile(link)
	require.NoError(t, err)
	defer ts.Close()
	assert.Equal(t, int64(1), ts.Len())
}

func TestJSONLMissingFile(t *testing.T) {
	_, err := OpenFile(filepath.Join(t.TempDir(), "nope.jsonl"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestJSONLTaskOutOfRange(t *testing.T) {
	ts, err := OpenFile(writeFile(t, "t.jsonl", `{"id":"a","prompt":"p"}`))
	require.NoError(t, err)
	defer ts.Close()
	for _, i := range []int64{-1, 1} {
		_, err := ts.Task(context.Background(), i)
		assert.Error(t, err, "Task(%d)", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ts.Task(ctx, 0)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestJSONLClose(t *testing.T) {
	ts, err := OpenFile(writeFile(t, "t.jsonl", `{"id":"a","prompt":"p"}`))
	require.NoError(t, err)
	require.NoError(t, ts.Close())
	_, err = ts.Task(context.Background(), 0)
	assert.ErrorIs(t, err, os.ErrClosed)
}

// TestJSONLWorkspaceFields: a JSONL task may name its workspace, tests and
// solution directories (relative to the file's directory), a verify
// command, its own timeouts and the verifier's environment.
func TestJSONLWorkspaceFields(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"envs/one", "tests/one", "solutions/one"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	abs := filepath.Join(root, "tests", "one")
	path := filepath.Join(root, "tasks.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(
		`{"id":"w","prompt":"fix it","environment":"envs/one","tests":"`+abs+`","verify":"sh /tests/run.sh","solution":"./solutions/one",`+
			`"agent_timeout_sec":90,"verifier_timeout_sec":2.5,"verifier_env":{"K":"v"}}`+"\n"+
			`{"id":"v","prompt":"touch done","verify":"test -f done"}`+"\n"+
			`{"id":"p","prompt":"plain","answer":"4"}`+"\n"), 0o644))
	// Relative paths are the file's, not the working directory's.
	t.Chdir(t.TempDir())
	ts, err := OpenFile(path)
	require.NoError(t, err)
	defer ts.Close()

	want := []Task{
		{ID: "w", Prompt: "fix it", Environment: filepath.Join(root, "envs", "one"), Tests: abs, Verify: "sh /tests/run.sh",
			Solution: filepath.Join(root, "solutions", "one"), AgentTimeout: 90 * time.Second, VerifierTimeout: 2500 * time.Millisecond,
			VerifierEnv: map[string]string{"K": "v"}},
		{ID: "v", Prompt: "touch done", Verify: "test -f done"},
		{ID: "p", Prompt: "plain", Answer: "4"},
	}
	for i, w := range want {
		got, err := ts.Task(context.Background(), int64(i))
		require.NoError(t, err)
		assert.Equal(t, w, got, "Task(%d)", i)
	}
}

func TestJSONLWorkspaceErrors(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	tests := []struct {
		line string
		want string
	}{
		{`{"id":"a","prompt":"p","environment":"missingQ"}`, `tasks.jsonl:1: "environment": no such directory`},
		{`{"id":"a","prompt":"p","solution":"file"}`, `tasks.jsonl:1: "solution" is a regular file, not a directory`},
		{`{"id":"a","prompt":"p","tests":"."}`, `tasks.jsonl:1: "tests" needs a "verify" command to run them`},
		{`{"id":"a","prompt":"p","verify":"x","agent_timeout_sec":-1}`, `tasks.jsonl:1: "agent_timeout_sec" must be a number of seconds from 0`},
		{`{"id":"a","prompt":"p","verify":"x","verifier_timeout_sec":"Q"}`, `tasks.jsonl:1: invalid task: "verifier_timeout_sec" must be a number, not a string`},
		{`{"id":"a","prompt":"p","verify":"x","verifier_env":{"K":1}}`, `tasks.jsonl:1: invalid task: "verifier_env`},
	}
	for _, tt := range tests {
		path := filepath.Join(root, "tasks.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(tt.line), 0o644))
		_, err := OpenFile(path)
		require.Error(t, err, "OpenFile(%s)", tt.line)
		assert.Contains(t, err.Error(), tt.want, "OpenFile(%s)", tt.line)
		assert.NotContains(t, strings.TrimPrefix(err.Error(), path), "Q", "OpenFile(%s) quotes the file", tt.line)
	}
}
