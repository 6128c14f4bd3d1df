package logtest_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/internal/logtest"
)

// Loggers in goroutines write while the test reads (go test -race): every
// line arrives whole.
func TestBufferTakesConcurrentWriters(t *testing.T) {
	var b logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&b, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				logger.Info("line", "writer", i, "n", j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	assert.Len(t, lines, 8*50)
	for _, l := range lines {
		assert.Contains(t, l, "msg=line writer=", "a line mixed with another: %q", l)
	}
	assert.Contains(t, b.String(), fmt.Sprintf("writer=%d n=%d", 7, 49))
}
