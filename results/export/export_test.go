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
	_, _, err = s.Put(ctx, failed, nil)
	require.NoError(t, err)
}

func TestExport(t *testing.T) {
	stores := map[string]func(t *testing.T) results.Store{
		"files": func(t *testing.T) results.Store {
			s, err := results.Open(t.TempDir())
			require.NoError(t, err)
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

			var pq bytes.Buffer
			require.NoError(t, export.Write(&pq, "parquet", rows))
			back, err := parquet.Read[export.Row](bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			require.NoError(t, err)
			assert.Equal(t, rows, back, "Parquet reads back as written")
			f, err := parquet.OpenFile(bytes.NewReader(pq.Bytes()), int64(pq.Len()))
			require.NoError(t, err)
			for _, col := range []string{"key", "epoch", "reward", "metrics", "prompt", "transcript", "attempts"} {
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

			assert.ErrorContains(t, export.Write(&jl, "csv", rows), "jsonl or parquet")
		})
	}
}
