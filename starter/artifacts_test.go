package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// `starter results --rollouts` counts each rollout's artifacts and lists
// them by path, size and type, with and without --attempts.
func TestResultsListArtifacts(t *testing.T) {
	dir := t.TempDir()
	store, err := results.Open(dir)
	require.NoError(t, err)
	key := rollout.Key("art", 0, 0, 0)
	tr := trace.Rollout{Key: key, TaskID: "t", Artifacts: []trace.Artifact{
		{Path: "report.txt", Size: 6, MediaType: "text/plain; charset=utf-8", Encoding: trace.ArtifactText, Content: "done.\n"},
		{Path: "huge.bin", Size: 9 << 20, Omitted: "past the 8 MiB an attempt keeps"},
	}, ArtifactsUnlisted: 2}
	_, _, err = store.Put(context.Background(), results.Record{Key: key, RunID: "art", TaskID: "t", Status: rollout.StatusOK, Attempt: 1}, &tr)
	require.NoError(t, err)
	require.NoError(t, store.Close())

	for _, extra := range [][]string{nil, {"--attempts"}} {
		args := append([]string{"starter", "results", "--runs-dir", dir, "--rollouts"}, extra...)
		out := captureStdout(t, func() { require.NoError(t, newApp().Run(append(args, "art"))) })
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(nil, 1<<20)
		require.True(t, sc.Scan(), "one line a rollout: %q", out)
		var line struct {
			Count int            `json:"artifact_count"`
			Files []artifactFile `json:"artifact_files"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		assert.Equal(t, 4, line.Count, "%v: the listed and the unlisted", extra)
		assert.Equal(t, []artifactFile{
			{Path: "report.txt", Size: 6, MediaType: "text/plain; charset=utf-8"},
			{Path: "huge.bin", Size: 9 << 20, Omitted: "past the 8 MiB an attempt keeps"},
		}, line.Files, extra)
	}
}
