package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// shell is a harness.Spec running script through sh -c.
func shell(script string, env ...string) harness.Spec {
	return harness.Spec{
		Command: []string{"sh", "-c", script},
		BaseURL: "http://127.0.0.1:9",
		Secret:  "rollout-secret-value",
		Model:   "test-model",
		Task:    tasksets.Task{ID: "t-1", Prompt: "say hi"},
		Env:     env,
	}
}

func TestLocalEnvContract(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-worker-real-key")
	t.Setenv("SOME_SERVICE_TOKEN", "worker-token")
	t.Setenv("EVALFLOW_TEST_PLAIN", "kept")
	out := t.TempDir()
	spec := shell(`env > "$OUT/env" && pwd > "$OUT/pwd" && cp "$EVALFLOW_TASK_FILE" "$OUT/task.json"`, "OUT="+out)
	spec.MaxTurns = 3

	l := &Runtime{Dir: t.TempDir()}
	res, err := l.Run(context.Background(), spec)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)

	envText, err := os.ReadFile(filepath.Join(out, "env"))
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(envText), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			env[name] = value
		}
	}
	pwd, err := os.ReadFile(filepath.Join(out, "pwd"))
	require.NoError(t, err)
	workdir := strings.TrimSpace(string(pwd))
	assert.Equal(t, l.Dir, filepath.Dir(workdir), "workdir is not under Local.Dir")

	want := map[string]string{
		"OPENAI_BASE_URL":      "http://127.0.0.1:9/v1",
		"OPENAI_API_KEY":       "rollout-secret-value",
		"OPENAI_MODEL":         "test-model",
		"ANTHROPIC_BASE_URL":   "http://127.0.0.1:9",
		"ANTHROPIC_API_KEY":    "rollout-secret-value",
		"ANTHROPIC_MODEL":      "test-model",
		"EVALFLOW_TASK_FILE":   filepath.Join(workdir, "task.json"),
		"EVALFLOW_PROMPT":      "say hi",
		"EVALFLOW_ANSWER_FILE": filepath.Join(workdir, "answer.txt"),
		"EVALFLOW_MAX_TURNS":   "3",
		"EVALFLOW_WORKDIR":     workdir,
		"EVALFLOW_TEST_PLAIN":  "kept",
		"OUT":                  out,
	}
	for name, value := range want {
		assert.Equal(t, value, env[name], "child saw %s", name)
	}
	assert.NotContains(t, env, "SOME_SERVICE_TOKEN")
	assert.NotContains(t, string(envText), "sk-worker-real-key")

	taskJSON, err := os.ReadFile(filepath.Join(out, "task.json"))
	require.NoError(t, err)
	var task tasksets.Task
	require.NoError(t, json.Unmarshal(taskJSON, &task))
	assert.Equal(t, spec.Task, task)
}

func TestLocalAnswer(t *testing.T) {
	tests := []struct {
		script string
		want   string
	}{
		{`printf '  42\n\n' > "$EVALFLOW_ANSWER_FILE"`, "42"},
		{`true`, ""},
		{`mkfifo "$EVALFLOW_ANSWER_FILE"`, ""},
		{`ln -s /etc/hostname "$EVALFLOW_ANSWER_FILE"`, ""},
	}
	for _, tt := range tests {
		res, err := (&Runtime{Dir: t.TempDir()}).Run(context.Background(), shell(tt.script))
		require.NoError(t, err, "Run(%q)", tt.script)
		assert.Equal(t, tt.want, res.Answer, "Run(%q).Answer", tt.script)
	}
}

func TestLocalNonZeroExitIsResult(t *testing.T) {
	res, err := (&Runtime{Dir: t.TempDir()}).Run(context.Background(), shell(`echo out; echo oops >&2; exit 3`))
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.False(t, res.TimedOut)
	assert.Equal(t, "out\n", res.Stdout)
	assert.Equal(t, "oops\n", res.Stderr)
	assert.Positive(t, res.Duration)
}

func TestLocalTimeoutKillsProcessGroup(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{"grandchild", `sleep 100 & echo $! > "$PIDFILE"; wait`},
		// Both ignore SIGTERM: only the SIGKILL after the grace period ends them.
		{"grandchild ignores SIGTERM", `trap '' TERM; (exec sleep 100) & echo $! > "$PIDFILE"; wait; wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			spec := shell(tt.script, "PIDFILE="+pidFile)
			spec.Timeout = time.Second
			l := &Runtime{Dir: t.TempDir(), Grace: 100 * time.Millisecond}

			res, err := l.Run(context.Background(), spec)
			require.NoError(t, err)
			assert.True(t, res.TimedOut, "Run(%q).TimedOut", tt.script)
			assert.Equal(t, -1, res.ExitCode)

			pid := readPID(t, pidFile)
			require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond,
				"process %d still alive after the harness was killed", pid)
		})
	}
}

func TestLocalContextCancel(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ready")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	spec := shell(`sleep 100 & echo $! > "$READY"; wait`, "READY="+fifo)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type outcome struct {
		res harness.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := (&Runtime{Dir: t.TempDir(), Grace: 100 * time.Millisecond}).Run(ctx, spec)
		done <- outcome{res, err}
	}()
	pids := make(chan int, 1)
	go func() {
		// Opening a FIFO blocks until the harness opens it for writing.
		f, err := os.Open(fifo)
		if err != nil {
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		pid, _ := strconv.Atoi(strings.TrimSpace(line))
		pids <- pid
	}()

	var pid int
	select {
	case pid = <-pids:
	case o := <-done:
		t.Fatalf("Run returned before the harness was ready: %+v, %v", o.res, o.err)
	}
	cancel()
	o := <-done
	require.ErrorIs(t, o.err, context.Canceled)
	assert.False(t, o.res.TimedOut, "a cancelled run is not a timeout")
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond,
		"process %d still alive after the run was cancelled", pid)
}

func TestLocalOutputTailBounded(t *testing.T) {
	spec := shell(`head -c 200000 /dev/zero | tr '\0' a; echo END; head -c 50000 /dev/zero | tr '\0' b >&2`)
	spec.OutputLimit = 100
	res, err := (&Runtime{Dir: t.TempDir()}).Run(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("a", 96)+"END\n", res.Stdout)
	assert.Equal(t, strings.Repeat("b", 100), res.Stderr)
}

func TestLocalCommandNotFound(t *testing.T) {
	spec := shell("")
	spec.Command = []string{"evalflow-no-such-program"}
	l := &Runtime{Dir: t.TempDir()}
	_, err := l.Run(context.Background(), spec)
	require.Error(t, err)
	assert.True(t, errors.Is(err, exec.ErrNotFound), "Run(missing program) = %v, want exec.ErrNotFound", err)
	assert.NotContains(t, err.Error(), spec.Secret)
	entries, err := os.ReadDir(l.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "workdir left behind after a failed start")
}

func TestLocalEmptyCommand(t *testing.T) {
	_, err := (&Runtime{Dir: t.TempDir()}).Run(context.Background(), harness.Spec{})
	assert.Error(t, err)
}

func TestLocalWorkdirCleanup(t *testing.T) {
	// Read-only leftovers must not defeat the cleanup.
	script := `echo x > scratch; mkdir -p ro/sub; echo y > ro/sub/f; chmod 500 ro/sub ro`
	tests := []struct {
		keep bool
		want int
	}{
		{keep: false, want: 0},
		{keep: true, want: 1},
	}
	for _, tt := range tests {
		l := &Runtime{Dir: t.TempDir(), Keep: tt.keep}
		res, err := l.Run(context.Background(), shell(script))
		require.NoError(t, err)
		require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
		entries, err := os.ReadDir(l.Dir)
		require.NoError(t, err)
		assert.Len(t, entries, tt.want, "workdirs left with Keep=%v", tt.keep)
		if tt.keep && len(entries) == 1 {
			assert.FileExists(t, filepath.Join(l.Dir, entries[0].Name(), harness.TaskFile))
			_ = harness.RemoveAll(filepath.Join(l.Dir, entries[0].Name()))
		}
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the harness did not record its child's pid")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Positive(t, pid)
	return pid
}

// alive reports whether pid is running. A zombie counts as dead: nothing
// may reap orphans in a container.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// A harness process sees the SDK timeouts and the run's own variables, the
// latter winning.
func TestLocalHarnessSeesRunEnv(t *testing.T) {
	out := t.TempDir()
	env := append(harness.SDKTimeoutEnv(20*time.Minute), "OUT="+out, "AGENT_FLAGS=a,b=c", "HTTPX_TIMEOUT=5")
	spec := shell(`env > "$OUT/env"`, env...)
	res, err := (&Runtime{Dir: t.TempDir()}).Run(context.Background(), spec)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	b, err := os.ReadFile(filepath.Join(out, "env"))
	require.NoError(t, err)
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	assert.Equal(t, "1200", got["OPENAI_TIMEOUT"])
	assert.Equal(t, "1200", got["OPENAI_REQUEST_TIMEOUT"])
	assert.Equal(t, "1200", got["ANTHROPIC_TIMEOUT"])
	assert.Equal(t, "5", got["HTTPX_TIMEOUT"], "the run's own value replaces the worker's")
	assert.Equal(t, "a,b=c", got["AGENT_FLAGS"])
}
