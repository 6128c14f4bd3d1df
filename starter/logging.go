package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
)

// quietLogger logs warnings and errors to stderr; the progress bar owns the
// terminal otherwise. EVALFLOW_DEBUG=1 logs everything.
func quietLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("EVALFLOW_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(shutdownFilter{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})})
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
