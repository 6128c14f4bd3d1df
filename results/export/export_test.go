package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export"
	"github.com/evalflow/evalflow/results/postgres"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/trace"
)

func text(role, s string) dialects.Message {
	return dialects.Message{Role: role, Content: []dialects.Part{{Type: dialects.PartText, Text: s}}}
}

// fill stores three rollouts: a success with a two-turn trace, a failure
// retried into a success, and a failure.
func fill(t *testing.T, s results.Store) {
	ctx := context.Background()
	ok := storetest.Record("run", 0, 0)
	ok.Attempt, ok.Metrics = 1, map[string]float64{"tests": 1, "judge": 0.5}
	ok.CostUSD = 0.0125
	tr := &trace.Rollout{Key: ok.Key, Harness: trace.Harness{Answer: "42"}, Turns: []trace.Turn{
		{Request: dialects.Request{Messages: []dialects.Message{text("system", "be brief"), text("user", "What is 6*7?")}},
			Response: dialects.Response{Message: text("assistant", "Let me think.")}},
		{Request: dialects.Request{Messages: []dialects.Message{text("user", "What is 6*7?"), text("assistant", "Let me think.")}},
			Response: dialects.Response{Message: text("assistant", "42")}},
	}}
	_, _, err := s.Put(ctx, ok, tr)
	require.NoError(t, err)

	retried := storetest.Record("run", 1, 0)
	_, _, err = s.Put(ctx, storetest.Failure(retried, 1), storetest.Trace(retried.Key, 3))
	require.NoError(t, err)
	retried.Attempt = 2
	_, _, err = s.Put(ctx, retried, storetest.Trace(retried.Key, 0))
	require.NoError(t, err)

	failed := storetest.Failure(storetest.Record("run", 2, 0), 1)
	failed.Metrics = nil
	failed.CostUSD, failed.UnpricedTurns = 0.5, 1
	_, _, err = s.Put(ctx, failed, nil)
	require.NoError(t, err)
}

func TestExport(t *testing.T) {
	stores := map[string]func(t *testing.T) results.Store{
		"files": func(t *testing.T) results.Store {
			s := storetest.Files(t, "")
			return s
		},
		"postgres": func(t *testing.T) results.Store {
			s, err := postgres.Open(context.Background(), pgtest.URL(t), postgres.Options{})
			require.NoError(t, err)
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			fill(t, s)
			rows, err := export.Rows(context.Background(), s, "run")
			require.NoError(t, err)
			require.Len(t, rows, 3)

			first := rows[0]
			assert.Equal(t, "run/0/0/0", first.Key)
			assert.Equal(t, "ok", first.Status)
			assert.Equal(t, "What is 6*7?", first.Prompt)
			assert.Equal(t, "42", first.Answer)
			assert.Equal(t, "user: What is 6*7?\n\nassistant: Let me think.\n\nassistant: 42", first.Transcript)
			var metrics map[string]float64
			require.NoError(t, json.Unmarshal([]byte(first.Metrics), &metrics))
			assert.Equal(t, map[string]float64{"tests": 1, "judge": 0.5}, metrics)
			assert.EqualValues(t, 1, first.Attempts)
			assert.EqualValues(t, 2, rows[1].Attempts, "the failed attempt is counted")
			assert.Equal(t, "ok", rows[1].Status)
			assert.Equal(t, "error", rows[2].Status)
			assert.Equal(t, "harness_exit", rows[2].Kind)
			assert.Equal(t, "{}", rows[2].Metrics)
			require.NotNil(t, first.Cost)
			assert.InDelta(t, 0.0125, *first.Cost, 1e-12, "cost_usd is the record's cost")
			assert.Nil(t, rows[2].Cost, "a rollout with an unpriced call has no cost_usd, not 0")

			var pq bytes.Buffer
			require.NoError(t, export.Write(&pq, "parquet", rows))
			back, err := parquet.Read[export.Row](bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			require.NoError(t, err)
			assert.Equal(t, rows, back, "Parquet reads back as written")
			f, err := parquet.OpenFile(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			require.NoError(t, err)
			for _, col := range []string{"key", "epoch", "reward", "metrics", "prompt", "transcript", "attempts", "cost_usd"} {
				_, ok := f.Schema().Lookup(col)
				assert.True(t, ok, "column %s", col)
			}

			var jl bytes.Buffer
			require.NoError(t, export.Write(&jl, "jsonl", rows))
			lines := strings.Split(strings.TrimSpace(jl.String()), "\n")
			require.Len(t, lines, 3)
			var row export.Row
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &row))
			assert.Equal(t, first, row)
			assert.Contains(t, lines[0], `"cost_usd":0.0125`)
			assert.Contains(t, lines[2], `"cost_usd":null`)

			assert.ErrorContains(t, export.Write(&jl, "csv", rows), "jsonl or parquet")
		})
	}
}

// A run with token data exports training samples, a row per sample, in
// verifiers' field names; a rollout whose second turn was tokenized again
// differently is two interleaved samples, and says it is not interleavable.
func TestExportSamples(t *testing.T) {
	ctx := context.Background()
	s := storetest.Files(t, "")
	defer s.Close()
	v3, v4 := int64(3), int64(4)
	tok := func(i int, prompt, completion []int32, v *int64) trace.Turn {
		return trace.Turn{Index: i, Status: 200, PolicyVersion: v,
			Response: dialects.Response{Message: text("assistant", "x")},
			Tokens:   &dialects.Tokens{PromptIDs: prompt, CompletionIDs: completion, Logprobs: make(dialects.Float32s, len(completion))}}
	}
	exact := storetest.Record("run", 0, 0)
	_, _, err := s.Put(ctx, exact, &trace.Rollout{Key: exact.Key, Turns: []trace.Turn{
		tok(0, []int32{1, 2}, []int32{3}, &v4), tok(1, []int32{1, 2, 3, 9}, []int32{4, 5}, &v3)}})
	require.NoError(t, err)
	broken := storetest.Record("run", 1, 0)
	_, _, err = s.Put(ctx, broken, &trace.Rollout{Key: broken.Key, Turns: []trace.Turn{
		tok(0, []int32{1, 2}, []int32{3}, nil), tok(1, []int32{1, 2, 30, 9}, []int32{4}, nil)}})
	require.NoError(t, err)

	rows, err := export.Samples(ctx, s, "run", "interleaved")
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, "run/0/0/0", rows[0].Key)
	assert.True(t, rows[0].Interleavable)
	assert.Equal(t, []int32{0, 1}, rows[0].Steps)
	assert.Equal(t, []int32{3, 9, 4, 5}, rows[0].CompletionIDs)
	assert.Equal(t, []int32{1, 0, 1, 1}, rows[0].CompletionMask)
	assert.Equal(t, int64(3), rows[0].PolicyVersion, "the oldest version of its steps")
	assert.False(t, rows[1].Interleavable)
	assert.Equal(t, []int32{1}, rows[2].Steps, "a sample starts where the prefix breaks")
	assert.Equal(t, int64(-1), rows[2].PolicyVersion)

	all, err := export.Rows(ctx, s, "run")
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, []bool{all[0].Interleavable, all[1].Interleavable})
	assert.Equal(t, []int64{0, 1}, []int64{all[0].PrefixBreaks, all[1].PrefixBreaks})

	var pq bytes.Buffer
	require.NoError(t, export.Write(&pq, "parquet", rows))
	back, err := parquet.Read[export.SampleRow](bytes.NewReader(pq.Bytes()), int64(pq.Len()))
	require.NoError(t, err)
	assert.Equal(t, rows, back)

	per, err := export.Samples(ctx, s, "run", "steps")
	require.NoError(t, err)
	assert.Len(t, per, 4)
	_, err = export.Samples(ctx, s, "run", "tokens")
	require.ErrorContains(t, err, `"interleaved" or "steps"`)
}
