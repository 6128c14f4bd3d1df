// Package keeper is the process that keeps a rollout's sandbox alive:
// `evalflow-agent sandbox keep` runs in the container beside the agent. It
// ends the sandbox after its hard lifetime, so that a sandbox whose worker
// died does not outlive it by long, and, in a sandbox without a network, it
// is the agent's one way out: it listens on the interception's loopback
// address inside the sandbox and carries each connection over a unix
// socket that the worker serves in a directory mounted into the sandbox.
package keeper

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command is the subcommand of evalflow-agent that runs Main.
const Command = "sandbox"

// Main runs `sandbox keep [--exec path] [--listen host:port --socket
// path] [--ready path] --lifetime d`, `sandbox forward --listen host:port
// --socket path -- command…` (a sandbox of bubblewrap's), or `sandbox
// oom-kills` (how many processes the kernel killed for the sandbox's
// memory limit), and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "oom-kills" {
		fmt.Fprintln(stdout, OOMKills())
		return 0
	}
	if len(args) > 0 && args[0] == "forward" {
		return forwardAndRun(args[1:], stderr)
	}
	if len(args) == 0 || args[0] != "keep" {
		fmt.Fprintln(stderr, "usage: evalflow-agent sandbox keep [--exec PATH] [--listen HOST:PORT --socket PATH] [--ready PATH] [--lifetime DURATION]\n       evalflow-agent sandbox forward --listen HOST:PORT --socket PATH -- COMMAND [ARG…]\n       evalflow-agent sandbox oom-kills")
		return 2
	}
	fs := flag.NewFlagSet("sandbox keep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address inside the sandbox to accept the agent's connections on")
	socket := fs.String("socket", "", "unix socket the worker serves, where each connection is carried")
	execSocket := fs.String("exec", "", "unix socket to serve the worker's commands on")
	ready := fs.String("ready", "", "unix socket to connect to once listening")
	lifetime := fs.Duration("lifetime", 0, "end the sandbox after this long; 0 is never")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if (*listen == "") != (*socket == "") {
		fmt.Fprintln(stderr, "sandbox keep: --listen and --socket go together")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *lifetime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *lifetime)
		defer cancel()
	}
	if *execSocket != "" {
		_ = os.Remove(*execSocket)
		ln, err := net.Listen("unix", *execSocket)
		if err != nil {
			fmt.Fprintln(stderr, "sandbox keep:", err)
			return 1
		}
		go func() { <-ctx.Done(); ln.Close() }()
		go ServeExec(ln)
	}
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintln(stderr, "sandbox keep:", err)
			return 1
		}
		go func() { <-ctx.Done(); ln.Close() }()
		go Forward(ln, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", *socket)
		})
	}
	if *ready != "" {
		c, err := net.Dial("unix", *ready)
		if err != nil {
			fmt.Fprintln(stderr, "sandbox keep:", err)
			return 1
		}
		c.Close()
	}
	<-ctx.Done()
	return 0
}

// forwardAndRun carries the connections to --listen over --socket while
// the command after the flags runs, and returns its exit code: the way
// out of a sandbox whose network namespace holds only loopback, for as
// long as its harness runs.
func forwardAndRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandbox forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address inside the sandbox to accept the agent's connections on")
	socket := fs.String("socket", "", "unix socket the worker serves, where each connection is carried")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *listen == "" || *socket == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "sandbox forward: --listen, --socket and a command are needed")
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "sandbox forward:", err)
		return 1
	}
	defer ln.Close()
	go Forward(ln, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", *socket)
	})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	return exitCode(cmd.ProcessState, err)
}

// Forward accepts connections on ln until it is closed and carries each
// to a connection dial opens, both ways.
func Forward(ln net.Listener, dial func(context.Context) (net.Conn, error)) {
	serve(ln, func(c net.Conn) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		up, err := dial(ctx)
		cancel()
		if err != nil {
			return
		}
		defer up.Close()
		pipe(c, up)
	})
}

// serve accepts connections on ln until it is closed, handles each in a
// goroutine of its own and closes it after, and returns once all are done.
func serve(ln net.Listener, handle func(net.Conn)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			handle(c)
		}()
	}
}

// pipe copies a to b and b to a until both directions end; a direction
// that ends closes its writing half, so a half-closed request still gets
// its answer.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go half(a, b)
	go half(b, a)
	<-done
	<-done
}

// OOMKills is the memory cgroup's count of processes killed for its limit
// (cgroup v2 memory.events, else v1 memory.oom_control), 0 when unknown.
func OOMKills() int {
	for _, f := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
	}
	return 0
}
