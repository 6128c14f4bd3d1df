package tunnel_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel"
)

// clock is a test clock the bucket's arithmetic reads, moved by the test
// alone (from the goroutine that takes).
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// takeAll takes tokens until the bucket has none and returns how many it gave.
func takeAll(t *testing.T, h *tunnel.HostLimiter) int {
	t.Helper()
	n := 0
	for {
		wait, err := h.Take()
		require.NoError(t, err)
		if wait > 0 {
			return n
		}
		n++
	}
}

func TestHostLimiterBucketArithmetic(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	h := &tunnel.HostLimiter{Path: filepath.Join(t.TempDir(), "bucket"), PerMinute: 60, Now: c.now}

	assert.Equal(t, 60, takeAll(t, h), "a new bucket holds a minute's budget")
	wait, err := h.Take()
	require.NoError(t, err)
	assert.Equal(t, time.Second, wait, "one token a second at 60 a minute")

	c.t = c.t.Add(2500 * time.Millisecond)
	assert.Equal(t, 2, takeAll(t, h), "2.5 s refill two tokens")
	wait, err = h.Take()
	require.NoError(t, err)
	assert.Equal(t, 500*time.Millisecond, wait, "the half token left counts")

	c.t = c.t.Add(time.Hour)
	assert.Equal(t, 60, takeAll(t, h), "an idle bucket holds no more than a minute's budget")

	c.t = c.t.Add(-time.Hour)
	assert.Equal(t, 0, takeAll(t, h), "a clock gone back refills nothing")
}

func TestHostLimiterStateSurvivesTheProcess(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	path := filepath.Join(t.TempDir(), "bucket")
	first := &tunnel.HostLimiter{Path: path, PerMinute: 5, Now: c.now}
	for range 3 {
		wait, err := first.Take()
		require.NoError(t, err)
		require.Zero(t, wait)
	}
	second := &tunnel.HostLimiter{Path: path, PerMinute: 5, Now: c.now}
	assert.Equal(t, 2, takeAll(t, second), "a second limiter on the file sees what the first took")
}

func TestHostLimiterWaitEndsWithContext(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	h := &tunnel.HostLimiter{Path: filepath.Join(t.TempDir(), "bucket"), PerMinute: 2, Now: c.now}
	require.NoError(t, h.Wait(context.Background()))
	require.NoError(t, h.Wait(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, h.Wait(ctx), context.Canceled, "the frozen clock never refills")
}

func TestHostLimiterRefusesAnotherUsersDirectory(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a directory away")
	}
	dir := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.Mkdir(dir, 0o777))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	_, err := (&tunnel.HostLimiter{Path: filepath.Join(dir, "bucket"), PerMinute: 5}).Take()
	assert.ErrorContains(t, err, "owned by uid 65534")
}

// limitChildEnv makes this test binary a process drawing from a bucket
// (TestHostLimiterChild).
const limitChildEnv = "EVALFLOW_TEST_LIMIT_CHILD"

// TestHostLimiterChild is a process of TestHostLimiterSharedAcrossProcesses:
// it tries to take tries tokens from the bucket at the path in its
// environment, with the clock frozen, and prints how many it got.
func TestHostLimiterChild(t *testing.T) {
	spec := os.Getenv(limitChildEnv)
	if spec == "" {
		t.Skip("run by TestHostLimiterSharedAcrossProcesses")
	}
	path, triesText, _ := strings.Cut(spec, "|")
	tries, err := strconv.Atoi(triesText)
	require.NoError(t, err)
	frozen := time.Unix(1_700_000_000, 0)
	h := &tunnel.HostLimiter{Path: path, PerMinute: 25, Now: func() time.Time { return frozen }}
	got := 0
	for range tries {
		wait, err := h.Take()
		require.NoError(t, err)
		if wait == 0 {
			got++
		}
	}
	fmt.Printf("granted=%d\n", got)
}

// Two worker processes on one host get the host's budget together, not
// each: with the clock frozen, the bucket's 25 tokens are all there is.
func TestHostLimiterSharedAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tunnel-limit")
	const procs, tries = 3, 200
	outs := make([]bytes.Buffer, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostLimiterChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), limitChildEnv+"="+path+"|"+strconv.Itoa(tries))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		cmds[i] = cmd
	}
	total := 0
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), outs[i].String())
		var n int
		line := outs[i].String()
		idx := strings.Index(line, "granted=")
		require.GreaterOrEqual(t, idx, 0, "child %d printed no count: %s", i, line)
		_, err := fmt.Sscanf(line[idx:], "granted=%d", &n)
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, 25, total, "%d processes drew %d tokens from a bucket of 25", procs, total)
}
