package wiring

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/logtest"
	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
)

// A store that never answers: one log line per attempt with its error and
// the next delay, then an error naming the store (never its password).
func TestWaitForStoreNamesWhatNeverAnswered(t *testing.T) {
	const password = "wait-test-pw-81c2"
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := WaitForStore(ctx, StoreConfig{URL: "postgres://evalflow:" + password + "@" + devtest.FreeAddr(t) + "/evalflow?sslmode=disable"}, logger)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrStopped), "a timeout is not a stop")
	assert.Contains(t, err.Error(), "the run store postgres://evalflow@")
	assert.Contains(t, err.Error(), "did not answer within the start timeout (--start-timeout")
	lines := strings.Count(logs.String(), "waiting for the run store")
	assert.GreaterOrEqual(t, lines, 2, "one line per attempt:\n%s", logs.String())
	assert.Contains(t, logs.String(), "next_attempt_in=250ms")
	assert.Contains(t, logs.String(), "next_attempt_in=500ms", "the delay grows")
	assert.NotContains(t, err.Error()+logs.String(), password)
}

// A stop signal during the wait ends it at once with ErrStopped.
func TestWaitForTemporalStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var logs logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	done := make(chan error, 1)
	go func() {
		_, err := WaitForTemporal(ctx, Connection{Address: devtest.FreeAddr(t), Namespace: "default"}, logger)
		done <- err
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "waiting for Temporal") }, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrStopped)
	case <-time.After(5 * time.Second):
		t.Fatal("the wait goes on after its context was cancelled")
	}
}

// A database that answers is opened (the real test cluster).
func TestWaitForStoreOpens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := WaitForStore(ctx, StoreConfig{URL: pgtest.URL(t)}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

func TestServiceTimeouts(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		start, drain time.Duration
		err          string
	}{
		{nil, DefaultStartTimeout, DefaultDrainTimeout, ""},
		{[]string{"--start-timeout", "10s", "--drain-timeout", "0s"}, 10 * time.Second, 0, ""},
		{[]string{"--start-timeout", "0s"}, 0, 0, "--start-timeout 0s: must be positive"},
		{[]string{"--drain-timeout", "-1s"}, 0, 0, "--drain-timeout -1s is negative"},
	} {
		var start, drain time.Duration
		var err error
		app := &cli.App{Flags: ServiceFlags(), Action: func(cctx *cli.Context) error {
			start, drain, err = ServiceTimeouts(cctx)
			return nil
		}}
		require.NoError(t, app.Run(append([]string{"worker"}, tc.args...)))
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, "ServiceTimeouts(%q)", tc.args)
			continue
		}
		require.NoError(t, err, "ServiceTimeouts(%q)", tc.args)
		assert.Equal(t, tc.start, start, "start of %q", tc.args)
		assert.Equal(t, tc.drain, drain, "drain of %q", tc.args)
	}
}
