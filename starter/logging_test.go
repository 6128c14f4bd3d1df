package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
)

// The worker's and the server's log lines go to <data-dir>/evalflow.log,
// never to the terminal the progress bar is drawn on.
func TestOpenLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	set := flag.NewFlagSet("eval", flag.ContinueOnError)
	for _, f := range append(wiring.LogFlags(), dataDirFlag) {
		require.NoError(t, f.Apply(set))
	}
	require.NoError(t, set.Parse([]string{"--data-dir", dir, "--log-format", "json"}))
	logger, f, path, err := openLog(cli.NewContext(&cli.App{}, set, nil))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "evalflow.log"), path)

	logger.Warn("rollout attempt failed; retrying", "key", "r/0/1/0")
	logger.Warn("activity canceled", "Error", "context canceled")
	require.NoError(t, f.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"msg":"rollout attempt failed; retrying"`)
	assert.NotContains(t, string(b), "activity canceled", "our own shutdown's reports are dropped")
}
