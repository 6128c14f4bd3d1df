package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/bench/internal/targets"
	"github.com/evalflow/evalflow/bench/internal/upstream"
)

// serveMain is the interception worker of the capacity section, run as a
// child process so that its memory is its own: an interception server
// relaying to -upstream, speaking HTTP/2 to it without TLS so that
// thousands of streams share a few upstream connections. It prints its URL
// and the rollout's secret on one line, then serves until stdin closes.
func serveMain(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	base := fs.String("upstream", "", "mock base URL")
	dialect := fs.String("dialect", targets.Chat, "upstream dialect")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	up, err := targets.Upstream(*dialect, *base, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	i, err := targets.NewInterception(up)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	i.Rollouts, i.Rotate = 1, 1<<30 // one rollout holds every stream; its turns are the check
	h := i.Header()
	fmt.Printf("%s %s\n", i.Srv.LocalURL(), h.Get("X-Api-Key"))
	_, _ = io.Copy(io.Discard, os.Stdin)
	turns, errored := i.Turns()
	fmt.Printf("turns %d %d\n", turns, errored)
	_ = i.Close()
	return 0
}

// child is a running process of this binary, talking over stdin and stdout.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	// first is the first line the child wrote: it is ready.
	first string
}

// spawn runs this binary with args and waits for its first line.
func spawn(ctx context.Context, what string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s process: %w", what, err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	if c.first, err = c.out.ReadString('\n'); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s process: %w", what, err)
	}
	return c, nil
}

// serveChild is a running serve process: an interception server.
type serveChild struct {
	*child
	url    string
	secret string
}

func startChild(ctx context.Context, base string) (*serveChild, error) {
	c, err := spawn(ctx, "interception", "serve", "-upstream", base)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(c.first)
	if len(f) != 2 {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		return nil, fmt.Errorf("interception process said %q", c.first)
	}
	return &serveChild{child: c, url: f[0], secret: f[1]}, nil
}

// stop closes the child's stdin and returns the turns it recorded.
func (c *serveChild) stop() (turns, errored int, err error) {
	_ = c.stdin.Close()
	line, rerr := c.out.ReadString('\n')
	werr := c.cmd.Wait()
	if rerr != nil {
		return 0, 0, fmt.Errorf("interception process: %w", rerr)
	}
	if _, err := fmt.Sscanf(line, "turns %d %d", &turns, &errored); err != nil {
		return 0, 0, fmt.Errorf("interception process said %q", line)
	}
	return turns, errored, werr
}

// rss reads a process's resident set and its high-water mark.
func rss(pid int) (cur, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			cur = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return cur, peak
}

func capacitySection(ctx context.Context, o options, logf func(string, ...any)) (*Capacity, error) {
	const events, gap = 16, 500 * time.Millisecond
	levels := []int{1000, 2000, 5000, 10000}
	if o.quick {
		levels = []int{200}
	}
	base, stop, err := upstream.Listen(upstream.New(upstream.Config{Events: events, Gap: gap}), true)
	if err != nil {
		return nil, err
	}
	defer stop()
	ch, err := startChild(ctx, base)
	if err != nil {
		return nil, err
	}
	pid := ch.cmd.Process.Pid
	idle, _ := rss(pid)
	out := &Capacity{Events: events, GapMS: int(gap / time.Millisecond), IdleRSS: idle,
		Note: "each stream holds a client connection to the interception process; the upstream side is HTTP/2 " +
			"(h2c) so streams share a few connections: the open-file limit here is 20,000 (hard), and one " +
			"HTTP/1.1 upstream connection per stream would need 20,000 descriptors at 10,000 streams."}
	target := loadgen.Target{
		Name: "relay", URL: ch.url + upstream.PathChat, Body: targets.Body(targets.Chat, 1<<10, true),
		Header: func() http.Header { return http.Header{"Authorization": {"Bearer " + ch.secret}} },
	}
	want := 0
	for _, n := range levels {
		c := loadgen.NewClient(n)
		var lvl CapacityLevel
		var once sync.Once
		lvl.StreamsResult = c.Streams(ctx, target, n, events, 2*time.Second, func() {
			once.Do(func() { lvl.RSS, lvl.PeakRSS = rss(pid) })
		})
		_, lvl.PeakRSS = rss(pid)
		c.HTTP.CloseIdleConnections()
		want += n
		out.Levels = append(out.Levels, lvl)
		if lvl.Lost == 0 && lvl.Errors == 0 && lvl.Merged == 0 {
			out.MaxClean = n
		}
		logf("  %5d streams: completed %d errors %d lost %d merged %d | ttft p99 %.1fms delay p99 %.1fms | rss %d MB peak %d MB %s",
			n, lvl.Completed, lvl.Errors, lvl.Lost, lvl.Merged, lvl.TTFT.P99/1000, lvl.Delay.P99/1000,
			lvl.RSS>>20, lvl.PeakRSS>>20, lvl.FirstError)
	}
	turns, errored, err := ch.stop()
	if err != nil {
		return out, err
	}
	if turns != want || errored != 0 {
		logf("  recorded %d turns (%d errored) for %d streams", turns, errored, want)
	}
	return out, nil
}
