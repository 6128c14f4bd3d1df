// Package export flattens a run into one table, a row per rollout, and
// writes it as JSON Lines or Parquet for pandas, polars or Hugging Face
// datasets. It reads any results.Store, so a run exports the same from
// files or PostgreSQL.
package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/trace"
)

// Row is one rollout, flat: the record's fields, its metrics as a JSON
// object in a string, and text from the trace of the attempt that made
// the record.
type Row struct {
	Key       string  `json:"key" parquet:"key"`
	RunID     string  `json:"run_id" parquet:"run_id"`
	Epoch     int64   `json:"epoch" parquet:"epoch"`
	Index     int64   `json:"index" parquet:"index"`
	K         int64   `json:"k" parquet:"k"`
	TaskID    string  `json:"task_id" parquet:"task_id"`
	Status    string  `json:"status" parquet:"status"`
	Kind      string  `json:"kind" parquet:"kind"`
	Error     string  `json:"error" parquet:"error"`
	Reward    float64 `json:"reward" parquet:"reward"`
	Metrics   string  `json:"metrics" parquet:"metrics"` // a JSON object
	Model     string  `json:"model" parquet:"model"`
	Turns     int64   `json:"turns" parquet:"turns"`
	InputTok  int64   `json:"input_tokens" parquet:"input_tokens"`
	OutputTok int64   `json:"output_tokens" parquet:"output_tokens"`
	Duration  int64   `json:"duration_ms" parquet:"duration_ms"`
	// Attempt numbers the attempt that made the record; Attempts counts
	// every stored attempt of the rollout.
	Attempt  int64 `json:"attempt" parquet:"attempt"`
	Attempts int64 `json:"attempts" parquet:"attempts"`
	// Prompt is the first user message the model got; Answer the agent's
	// final answer; Transcript the last call's conversation and reply,
	// one "role: text" block per message.
	Prompt     string `json:"prompt" parquet:"prompt"`
	Answer     string `json:"answer" parquet:"answer"`
	Transcript string `json:"transcript" parquet:"transcript"`
	FinishedAt string `json:"finished_at" parquet:"finished_at"` // RFC 3339
}

// Rows reads a run's rollouts from store, in the order they were stored.
// A rollout whose trace is missing gets empty text.
func Rows(ctx context.Context, store results.Store, runID string) ([]Row, error) {
	recs, err := store.List(ctx, runID)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(recs))
	for _, rec := range recs {
		row, err := rowOf(ctx, store, rec)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func rowOf(ctx context.Context, store results.Store, rec results.Record) (Row, error) {
	metrics := "{}"
	if len(rec.Metrics) > 0 {
		b, err := json.Marshal(rec.Metrics)
		if err != nil {
			return Row{}, err
		}
		metrics = string(b)
	}
	row := Row{
		Key: rec.Key, RunID: rec.RunID, Epoch: int64(rec.Epoch), Index: rec.Index, K: int64(rec.K),
		TaskID: rec.TaskID, Status: rec.Status, Kind: rec.ErrorKind, Error: rec.Error, Reward: rec.Reward,
		Metrics: metrics, Model: rec.Model, Turns: int64(rec.Turns), InputTok: int64(rec.InputTokens),
		OutputTok: int64(rec.OutputTokens), Duration: rec.DurationMS, Attempt: int64(rec.Attempt),
		FinishedAt: rec.FinishedAt.UTC().Format(time.RFC3339Nano),
	}
	attempts, err := store.Attempts(ctx, rec.RunID, rec.Key)
	if err != nil {
		return Row{}, fmt.Errorf("export %s: %w", rec.Key, err)
	}
	row.Attempts = int64(len(attempts))
	if rec.Trace == "" {
		return row, nil
	}
	tr, err := store.Trace(ctx, rec.RunID, rec.Key)
	if errors.Is(err, fs.ErrNotExist) {
		return row, nil
	}
	if err != nil {
		return Row{}, fmt.Errorf("export %s: %w", rec.Key, err)
	}
	row.Prompt, row.Answer, row.Transcript = prompt(tr), tr.Harness.Answer, transcript(tr)
	return row, nil
}

// prompt is the text of the first user message of the first call.
func prompt(tr *trace.Rollout) string {
	if len(tr.Turns) == 0 {
		return ""
	}
	for _, m := range tr.Turns[0].Request.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

// transcript is the last call's messages and the model's reply.
func transcript(tr *trace.Rollout) string {
	if len(tr.Turns) == 0 {
		return ""
	}
	last := tr.Turns[len(tr.Turns)-1]
	var b strings.Builder
	add := func(role, text string) {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(role + ": " + text)
	}
	for _, m := range last.Request.Messages {
		add(m.Role, m.Text())
	}
	if m := last.Response.Message; m.Role != "" {
		add(m.Role, m.Text())
	}
	return b.String()
}

// Formats are the formats Write writes.
var Formats = []string{"jsonl", "parquet"}

// Write writes rows to w as "jsonl" (one JSON object a line) or "parquet"
// (one row group, zstd-compressed columns).
func Write(w io.Writer, format string, rows []Row) error {
	switch format {
	case "jsonl":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "parquet":
		pw := parquet.NewGenericWriter[Row](w, parquet.Compression(&parquet.Zstd))
		if _, err := pw.Write(rows); err != nil {
			return fmt.Errorf("write parquet: %w", err)
		}
		if err := pw.Close(); err != nil {
			return fmt.Errorf("write parquet: %w", err)
		}
		return nil
	}
	return fmt.Errorf("unknown export format %q: want %s", format, strings.Join(Formats, " or "))
}
