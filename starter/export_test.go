package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results/export"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/trace"
)

// starter export --samples writes a row per training sample of a run with
// token data, refuses a view it does not know, and says what a run
// without token data lacks.
func TestExportSamplesCommand(t *testing.T) {
	dir := t.TempDir()
	store := storetest.Files(t, dir)
	rec := storetest.Record("tok", 0, 0)
	_, _, err := store.Put(context.Background(), rec, &trace.Rollout{Key: rec.Key, Turns: []trace.Turn{
		{Index: 0, Status: 200, Tokens: &dialects.Tokens{PromptIDs: []int32{1}, CompletionIDs: []int32{2}, Logprobs: dialects.Float32s{-0.5}}},
		{Index: 1, Status: 200, Tokens: &dialects.Tokens{PromptIDs: []int32{1, 2, 3}, CompletionIDs: []int32{4}, Logprobs: dialects.Float32s{-0.25}}},
	}})
	require.NoError(t, err)
	plain := storetest.Record("plain", 0, 0)
	_, _, err = store.Put(context.Background(), plain, storetest.Trace(plain.Key, 0))
	require.NoError(t, err)
	require.NoError(t, store.Close())

	out := filepath.Join(t.TempDir(), "samples.jsonl")
	require.NoError(t, newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--samples", "interleaved", "--out", out, "tok"}))
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	var rows []export.SampleRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r export.SampleRow
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		rows = append(rows, r)
	}
	require.Len(t, rows, 1, "two turns that extend each other are one sample")
	assert.Equal(t, []int32{2, 3, 4}, rows[0].CompletionIDs)
	assert.Equal(t, []int32{1, 0, 1}, rows[0].CompletionMask)

	err = newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--samples", "tokens", "tok"})
	require.ErrorContains(t, err, `--samples "tokens": want interleaved or steps`)
	err = newApp().Run([]string{"starter", "export", "--runs-dir", dir, "--samples", "steps", "--out", out, "plain"})
	require.ErrorContains(t, err, "run with --trace-tokens")
}
