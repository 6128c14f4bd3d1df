package keeper

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// A sandbox's keeper executes the worker's commands (the harness, the
// verifier) as its own children: one connection to its exec socket per
// command, a JSON request line, then frames back — the command's output
// as it comes and, last, its exit code. A process is far cheaper to start
// this way than through the engine's exec, and a connection that closes
// early kills the command's process group, so a timeout ends the command
// and not the sandbox.

// Request is one command to execute.
type Request struct {
	Argv []string `json:"argv"`
	// Env is added to the keeper's environment (the image's), KEY=VALUE;
	// a later entry wins.
	Env []string `json:"env,omitempty"`
	Dir string   `json:"dir,omitempty"`
}

// Frame kinds.
const (
	frameStdout = 1
	frameStderr = 2
	frameExit   = 3
)

// exitFrame ends a command's frames.
type exitFrame struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

// outputGrace is how long the output of a command is read after it
// exited, while a process it left in the background still holds it.
const outputGrace = time.Second

// ServeExec executes the commands of each connection accepted on ln
// until it is closed.
func ServeExec(ln net.Listener) { serve(ln, serveOne) }

func serveOne(c net.Conn) {
	var req Request
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	w := &frameWriter{w: c}
	if err == nil && len(req.Argv) == 0 {
		err = errors.New("empty command")
	}
	if err != nil {
		w.exit(exitFrame{Code: -1, Error: "bad request: " + err.Error()})
		return
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Dir = req.Dir
	cmd.Stdout, cmd.Stderr = w.stream(frameStdout), w.stream(frameStderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = outputGrace
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		w.write(frameStderr, []byte(err.Error()+"\n"))
		w.exit(exitFrame{Code: code})
		return
	}
	// The worker closing its end ends the command: its whole group.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(gone)
	}()
	done := make(chan struct{})
	go func() {
		select {
		case <-gone:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	w.exit(exitFrame{Code: exitCode(cmd.ProcessState, err)})
}

// exitCode is the shell's convention: the code, or 128 + the signal.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	if err != nil {
		return -1
	}
	return 0
}

// frameWriter writes frames to a connection, one at a time.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (f *frameWriter) write(kind byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(p)))
	if _, err := f.w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := f.w.Write(p)
	return err
}

func (f *frameWriter) exit(e exitFrame) {
	data, _ := json.Marshal(e)
	_ = f.write(frameExit, data)
}

// stream is an io.Writer of one output stream's frames. A worker that went
// away is no error of the command's.
func (f *frameWriter) stream(kind byte) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		_ = f.write(kind, p)
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// Exec executes req through the keeper serving the exec socket at path,
// copying its output to stdout and stderr, and returns its exit code. A
// ctx that ends closes the connection, which kills the command.
func Exec(ctx context.Context, path string, req Request, stdout, stderr io.Writer) (int, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, fmt.Errorf("reach the sandbox's keeper: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	line, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return 0, ctxOr(ctx, fmt.Errorf("send to the sandbox's keeper: %w", err))
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return 0, ctxOr(ctx, fmt.Errorf("the sandbox's keeper went away: %w", err))
		}
		n := int64(binary.BigEndian.Uint32(hdr[1:]))
		switch hdr[0] {
		case frameStdout, frameStderr:
			w := stdout
			if hdr[0] == frameStderr {
				w = stderr
			}
			if w == nil {
				w = io.Discard
			}
			if _, err := io.CopyN(w, r, n); err != nil {
				return 0, ctxOr(ctx, fmt.Errorf("the sandbox's keeper went away: %w", err))
			}
		case frameExit:
			var e exitFrame
			data := make([]byte, n)
			if _, err := io.ReadFull(r, data); err != nil {
				return 0, ctxOr(ctx, err)
			}
			if err := json.Unmarshal(data, &e); err != nil {
				return 0, fmt.Errorf("the sandbox's keeper: %w", err)
			}
			if e.Error != "" {
				return 0, fmt.Errorf("the sandbox's keeper: %s", e.Error)
			}
			return e.Code, nil
		default:
			return 0, fmt.Errorf("the sandbox's keeper sent a frame of kind %d", hdr[0])
		}
	}
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
