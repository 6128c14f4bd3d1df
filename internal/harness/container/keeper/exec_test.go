package keeper_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/harness/container/keeper"
)

func serve(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "exec.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { keeper.ServeExec(ln); close(done) }()
	t.Cleanup(func() { ln.Close(); <-done })
	return path
}

func TestExecOutputAndExitCodes(t *testing.T) {
	sock := serve(t)
	ctx := context.Background()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code, err := keeper.Exec(ctx, sock, keeper.Request{
		Argv: []string{"sh", "-c", `echo "$GREETING from $PWD"; echo oops >&2; exit 3`},
		Env:  []string{"GREETING=hi"}, Dir: dir,
	}, &out, &errb)
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	assert.Equal(t, "hi from "+dir+"\n", out.String())
	assert.Equal(t, "oops\n", errb.String())

	code, err = keeper.Exec(ctx, sock, keeper.Request{Argv: []string{"sh", "-c", "kill -9 $$"}}, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, 137, code, "killed by a signal: 128 + the signal")

	errb.Reset()
	code, err = keeper.Exec(ctx, sock, keeper.Request{Argv: []string{"no-such-program-here"}}, nil, &errb)
	require.NoError(t, err)
	assert.Equal(t, 127, code)
	assert.NotEmpty(t, errb.String())

	out.Reset()
	code, err = keeper.Exec(ctx, sock, keeper.Request{Argv: []string{"sh", "-c", "head -c 200000 /dev/zero | tr '\\0' y"}}, &out, nil)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, strings.Repeat("y", 200000), out.String())
}

// A command whose caller goes away is killed with everything it started;
// one that leaves a service in the background returns, the service
// running on.
func TestExecCancelKillsTheGroupAndServicesOutlive(t *testing.T) {
	sock := serve(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := keeper.Exec(ctx, sock, keeper.Request{Argv: []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; wait"}}, nil, nil)
		errc <- err
	}()
	require.Eventually(t, func() bool { b, _ := os.ReadFile(pidFile); return len(b) > 0 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	b, _ := os.ReadFile(pidFile)
	pid := strings.TrimSpace(string(b))
	require.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + pid)
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the command's child died with it")

	svc := filepath.Join(dir, "svc.pid")
	code, err := keeper.Exec(context.Background(), sock, keeper.Request{Argv: []string{"sh", "-c", "sleep 300 & echo $! > " + svc}}, nil, nil)
	require.NoError(t, err)
	assert.Zero(t, code)
	b, _ = os.ReadFile(svc)
	pid = strings.TrimSpace(string(b))
	_, err = os.Stat("/proc/" + pid)
	assert.NoError(t, err, "a service left in the background runs on")
	n, err := strconv.Atoi(pid)
	require.NoError(t, err)
	p, _ := os.FindProcess(n)
	_ = p.Kill()
}
