package tunnel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// useFRPClient makes FRP start name args as its client process for the test.
func useFRPClient(t *testing.T, name string, args ...string) {
	t.Helper()
	old := frpClientCommand
	frpClientCommand = func() (string, []string, error) { return name, args, nil }
	t.Cleanup(func() { frpClientCommand = old })
}

const testToken = "frp-secret-token-4711"

func TestFRPClientThatDoesNotServe(t *testing.T) {
	tests := []struct {
		name, script string
		want         string
	}{
		{"exits at once", "exit 0", "exited without answering"},
		{"runs its own main", "echo PASS", `answered "PASS"`},
		{"echoes its stdin", "head -n 1", "answered"},
		{"fails on stderr", "head -n 1 >&2; exit 2", "exit status 2: {"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			useFRPClient(t, "sh", "-c", tt.script)
			f := &FRP{ServerAddr: "127.0.0.1", Token: testToken, Retry: Retry{Attempts: 1}}
			_, err := f.Expose(context.Background(), "127.0.0.1", 1)
			require.Error(t, err)
			assert.True(t, IsError(err), "Expose = %T, want *Error", err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "ServeFRPClientIfAsked")
			assert.NotContains(t, err.Error(), testToken)
		})
	}
}

func TestFRPClientThatNeverAnswersIsKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	useFRPClient(t, "sh", "-c", `echo $$ > "$0"; exec sleep 60`, pidFile)
	f := &FRP{ServerAddr: "127.0.0.1", Token: testToken, Retry: Retry{Attempts: 1}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := f.Expose(ctx, "127.0.0.1", 1)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second, "Expose returns when its context ends")
	require.ErrorIs(t, syscall.Kill(readPID(t, pidFile), 0), syscall.ESRCH, "the process is gone, reaped included")
}

func TestFRPClientGetsTokenOnStdinOnly(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc")
	}
	dir := t.TempDir()
	stdin, seen := filepath.Join(dir, "stdin"), filepath.Join(dir, "seen")
	useFRPClient(t, "sh", "-c", `head -n 1 > "$0"; tr '\0' '\n' < /proc/$$/environ > "$1"; tr '\0' '\n' < /proc/$$/cmdline >> "$1"`, stdin, seen)
	f := &FRP{ServerAddr: "127.0.0.1", Token: testToken, Retry: Retry{Attempts: 1}}
	_, err := f.Expose(context.Background(), "127.0.0.1", 1)
	require.Error(t, err, "the stand-in never answers")

	in, err := os.ReadFile(stdin)
	require.NoError(t, err)
	assert.Contains(t, string(in), `"token":"`+testToken+`"`)
	env, err := os.ReadFile(seen)
	require.NoError(t, err)
	assert.Contains(t, string(env), frpClientEnv+"=1")
	assert.NotContains(t, string(env), testToken, "environment or arguments of the client process")
}

func TestFRPClientProcessLife(t *testing.T) {
	frps := tunneltest.StartFRPS(t)
	f := &FRP{ServerAddr: frps.Addr, ServerPort: frps.Port, Token: frps.Token}

	t.Run("Close ends it", func(t *testing.T) {
		exp, err := f.Expose(context.Background(), "127.0.0.1", 1)
		require.NoError(t, err)
		pid := exp.(*frpExposure).process.Pid
		require.NoError(t, syscall.Kill(pid, 0), "client process %d runs", pid)
		require.NoError(t, exp.(Watched).Err())
		require.NoError(t, exp.Close())
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the process is gone, reaped included")
		assert.EqualError(t, exp.(Watched).Err(), "frp client exited")
	})
	t.Run("it exits when frps goes", func(t *testing.T) {
		exp, err := f.Expose(context.Background(), "127.0.0.1", 1)
		require.NoError(t, err)
		defer exp.Close()
		frps.Kill()
		w := exp.(Watched)
		require.Eventually(t, func() bool { return w.Err() != nil }, 30*time.Second, 10*time.Millisecond)
		assert.EqualError(t, w.Err(), "frp client exited (exit status 3: frps closed the control connection)")
		require.ErrorIs(t, syscall.Kill(exp.(*frpExposure).process.Pid, 0), syscall.ESRCH, "the process is gone, reaped included")
	})
}

func readPID(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscan(string(b), &pid)
	require.NoError(t, err)
	return pid
}

func TestLastLines(t *testing.T) {
	long := func(c string) string { return strings.Repeat(c, 300) + "\n" }
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"nothing", 64, nil, ""},
		{"lines on one line", 64, []string{"a\n", "\n b \n"}, "a | b"},
		{"line cut at the front dropped", 8, []string{"secret-1\nok\n"}, "ok"},
		{"last 512 bytes", 4096, []string{long("a"), long("b"), long("c")}, strings.Repeat("c", 300)},
	}
	for _, tt := range tests {
		l := &lastLines{max: tt.max}
		for _, w := range tt.writes {
			_, _ = l.Write([]byte(w))
		}
		assert.Equal(t, tt.want, l.String(), "%s: lastLines%q", tt.name, tt.writes)
	}
}
