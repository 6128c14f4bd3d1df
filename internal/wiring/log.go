package wiring

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"
)

// NewLogHandler is the slog handler LogFlags ask for, writing to w.
func NewLogHandler(cctx *cli.Context, w io.Writer) (slog.Handler, error) {
	var level slog.Level
	switch text := cctx.String(FlagLogLevel); text {
	case "debug", "info", "warn", "error":
		if err := level.UnmarshalText([]byte(text)); err != nil {
			return nil, fmt.Errorf("--%s %q: %w", FlagLogLevel, text, err)
		}
	default:
		return nil, fmt.Errorf("--%s %q: want debug, info, warn or error", FlagLogLevel, text)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format := cctx.String(FlagLogFormat); format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	default:
		return nil, fmt.Errorf("--%s %q: want text or json", FlagLogFormat, format)
	}
}
