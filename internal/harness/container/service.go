package container

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container/keeper"
)

// ServiceLogName is the name of the output of a task image's ENTRYPOINT
// and CMD in a rollout's trace.
const ServiceLogName = "entrypoint.log"

// serviceOutputLimit bounds the output of an image's ENTRYPOINT and CMD
// kept in a trace.
const serviceOutputLimit = 64 << 10

// service is the image's ENTRYPOINT and CMD running in a sandbox beside
// its keeper, as the engine would have run them had the keeper not
// taken their place: a task whose image starts a web server, a database
// or edits /etc/hosts as it starts finds them so.
type service struct {
	argv   []string
	out    harness.Tail
	cancel context.CancelFunc
	done   chan struct{}
	// code and err are how it ended, read once done is closed.
	code int
	err  error
}

// serviceArgv is what the engine runs of img: its ENTRYPOINT followed by
// its CMD; nil for an image with neither.
func serviceArgv(img engine.Image) []string {
	argv := append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...)
	if len(argv) == 0 {
		return nil
	}
	return argv
}

// startService starts the image's ENTRYPOINT and CMD through the
// sandbox's keeper, in the image's WORKDIR (or /) with its environment
// and user, and returns at once: it runs until it ends by itself or the
// sandbox is stopped. One that fails or exits at once (a shell without a
// terminal) ends nothing but itself; its output says so.
func (sb *sandbox) startService(img engine.Image) {
	argv := serviceArgv(img)
	if argv == nil {
		return
	}
	dir := img.Config.WorkingDir
	if dir == "" {
		dir = "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{argv: argv, out: harness.NewTail(serviceOutputLimit), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.code, s.err = keeper.Exec(ctx, filepath.Join(sb.runDir, execSocket), keeper.Request{Argv: argv, Dir: dir}, s.out, s.out)
	}()
	sb.service = s
}

// stop ends the service (its process group; the sandbox's removal ends
// whatever else it started) and waits for its output.
func (s *service) stop() {
	if s == nil {
		return
	}
	s.cancel()
	<-s.done
}

// traceLog is the service's output so far, for the trace, headed by its
// command and, once it ended by itself, followed by how.
func (s *service) traceLog() []harness.SessionLog {
	if s == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[the image's ENTRYPOINT and CMD: %q]\n", s.argv)
	b.WriteString(s.out.String())
	select {
	case <-s.done:
		switch {
		case s.err != nil && !errors.Is(s.err, context.Canceled):
			fmt.Fprintf(&b, "\n[ended: %v]\n", s.err)
		case s.err == nil:
			fmt.Fprintf(&b, "\n[exited with code %d]\n", s.code)
		}
	default:
	}
	return []harness.SessionLog{{Name: ServiceLogName, Content: b.String()}}
}
