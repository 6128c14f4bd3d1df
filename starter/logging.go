package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
)

// logName is the starter's log file in --data-dir. The embedded Temporal
// server's own log is temporal.log beside it.
const logName = "evalflow.log"

// openLog opens the log of a process that runs the embedded server or a
// worker: the progress bar owns the terminal, so their log lines (rollout
// retries, the SDK's reports) go to <data-dir>/evalflow.log, appended to.
func openLog(cctx *cli.Context) (*slog.Logger, io.Closer, string, error) {
	dir := cctx.String(dataDirFlag.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, "", fmt.Errorf("create --data-dir: %w", err)
	}
	path := filepath.Join(dir, logName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, "", fmt.Errorf("open log: %w", err)
	}
	h, err := wiring.NewLogHandler(cctx, f)
	if err != nil {
		_ = f.Close()
		return nil, nil, "", err
	}
	return slog.New(shutdownFilter{h}), f, path, nil
}

// shutdownFilter drops the SDK's reports of work cut short by our own
// shutdown (Ctrl-C): they are expected, and the run resumes from them.
type shutdownFilter struct{ slog.Handler }

func (f shutdownFilter) Handle(ctx context.Context, r slog.Record) error {
	canceled := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "Error" && strings.Contains(a.Value.String(), "context canceled") {
			canceled = true
			return false
		}
		return true
	})
	if canceled {
		return nil
	}
	return f.Handler.Handle(ctx, r)
}

func (f shutdownFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return shutdownFilter{f.Handler.WithAttrs(as)}
}

func (f shutdownFilter) WithGroup(name string) slog.Handler {
	return shutdownFilter{f.Handler.WithGroup(name)}
}
