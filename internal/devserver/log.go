package devserver

import (
	"fmt"
	"io"
	"os"

	"go.temporal.io/server/common/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// openServerLog opens path for appending and returns a warn-level Temporal
// logger writing JSON lines to it, so the server never writes to the terminal.
func openServerLog(path string) (log.Logger, io.Closer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open server log: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(f), zapcore.WarnLevel)
	// A fatal entry panics rather than exiting the process: one at start
	// (a port taken between our pick and the server's bind) becomes
	// Start's error, and the caller can try other ports.
	return log.NewZapLogger(zap.New(core, zap.ErrorOutput(zapcore.Lock(f)), zap.WithFatalHook(zapcore.WriteThenPanic))), f, nil
}
