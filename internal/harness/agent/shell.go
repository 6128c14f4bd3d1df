package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// drainGrace bounds the wait for a command's output once its process group
// is dead: only a process that left the group (setsid) can still hold it.
const drainGrace = 2 * time.Second

// guardScript leads a command's process group. It holds the read end of a
// pipe only the agent writes to and, on EOF (the agent closed it or died,
// even by SIGKILL), kills the group, so no command outlives the agent.
const guardScript = `trap '' TERM INT HUP QUIT; read -r _; kill -KILL 0`

// shell runs command with sh -c in the workspace, in a process group of its
// own that is killed on timeout and when the command returns.
func (tb *tools) shell(ctx context.Context, command string) result {
	ctx, cancel := context.WithTimeout(ctx, tb.timeout)
	defer cancel()
	out := newClipped(tb.outputLimit)
	state, canceled, err := tb.runGrouped(ctx, command, out)
	switch {
	case err != nil:
		return failed("shell: %v", err)
	case canceled && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return failed("timed out after %v; the command and its processes were killed\n%s", tb.timeout, out)
	case canceled:
		return failed("the agent is stopping; the command was killed\n%s", out)
	}
	status := fmt.Sprintf("exit code: %d", state.ExitCode())
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		status = fmt.Sprintf("killed by signal %v", ws.Signal())
	}
	if out.total == 0 {
		return result{text: status + " (no output)"}
	}
	return result{text: status + "\n" + out.String()}
}

// runGrouped runs command under a guard (see guardScript) and writes its
// combined output to out. canceled reports that ctx ended it.
func (tb *tools) runGrouped(ctx context.Context, command string, out io.Writer) (state *os.ProcessState, canceled bool, err error) {
	guardR, guardW, err := os.Pipe()
	if err != nil {
		return nil, false, err
	}
	defer guardW.Close()
	guard := exec.Command("/bin/sh", "-c", guardScript)
	guard.Stdin = guardR
	guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = guard.Start()
	guardR.Close()
	if err != nil {
		return nil, false, fmt.Errorf("start: %w", err)
	}
	pgid := guard.Process.Pid
	defer func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = guard.Wait()
	}()

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, false, err
	}
	defer outR.Close()
	var killed atomic.Bool
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Dir = tb.workspace
	cmd.Env = tb.env
	// A pipe we own rather than an io.Writer: Wait then returns when sh
	// exits, even if a background child still holds the pipe.
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	cmd.Cancel = func() error {
		killed.Store(true)
		return syscall.Kill(-pgid, syscall.SIGKILL)
	}
	err = cmd.Start()
	outW.Close()
	if err != nil {
		return nil, false, fmt.Errorf("start: %w", err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, outR)
	}()

	waitErr := cmd.Wait()
	// What the command left in the background dies with it; the output
	// then ends as soon as the group is gone.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = outR.SetReadDeadline(time.Now().Add(drainGrace))
	<-copied
	if cmd.ProcessState == nil {
		return nil, false, fmt.Errorf("wait: %w", waitErr)
	}
	return cmd.ProcessState, killed.Load(), nil
}

// clipped keeps the head and the tail of what is written to it, limit bytes
// in all, and counts the rest.
type clipped struct {
	headMax, tailMax int
	head, tail       []byte
	total            int64
}

var _ io.Writer = (*clipped)(nil)

func newClipped(limit int) *clipped {
	return &clipped{headMax: limit / 2, tailMax: limit - limit/2}
}

func (c *clipped) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headMax - len(c.head); room > 0 {
		take := min(room, len(p))
		c.head = append(c.head, p[:take]...)
		p = p[take:]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailMax {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax:]...)
	}
	return n, nil
}

// String is the output, or its head and tail around a "[… N bytes cut …]"
// line; neither cuts a UTF-8 character in two.
func (c *clipped) String() string {
	if c.total <= int64(c.headMax+c.tailMax) {
		return string(c.head) + string(c.tail)
	}
	head := c.head
	if i := lastRuneStart(head); i >= 0 && !utf8.FullRune(head[i:]) {
		head = head[:i]
	}
	tail := c.tail[len(c.tail)-c.tailMax:]
	for k := 0; k < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); k++ {
		tail = tail[1:]
	}
	var b strings.Builder
	b.Write(head)
	if len(head) > 0 && head[len(head)-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[… %d bytes cut …]\n", c.total-int64(len(head)+len(tail)))
	b.Write(tail)
	return b.String()
}

// lastRuneStart is the index of the start of the last rune among the last
// few bytes of b, or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}
