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
	"github.com/evalflow/evalflow/trajectory"
)

// Row is one rollout, flat: the record's fields, its metrics as a JSON
// object in a string, and text from the trace of the attempt that made
// the record.
type Row struct {
	Key   string `json:"key" parquet:"key"`
	RunID string `json:"run_id" parquet:"run_id"`
	// Cell names the sweep's cell (harness@model) the rollout is of, in
	// a sweep's export; empty otherwise.
	Cell      string  `json:"cell,omitempty" parquet:"cell,optional"`
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
	// Cost is what the rollout's model calls cost in USD; null when a call
	// was of a model without a price, so that its cost is unknown.
	Cost *float64 `json:"cost_usd" parquet:"cost_usd,optional"`
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
	// Steps counts the model calls answered; with token data, Interleavable
	// says each extends the one before exactly (one training sample) and
	// PrefixBreaks counts where it does not (see package trajectory).
	Steps         int64 `json:"steps" parquet:"steps"`
	Interleavable bool  `json:"interleavable" parquet:"interleavable"`
	PrefixBreaks  int64 `json:"prefix_breaks" parquet:"prefix_breaks"`
}

// SampleRow is one training sample of a rollout (package trajectory):
// token ids, masks and log probabilities in verifiers' field names, with
// the rollout's reward.
type SampleRow struct {
	Key    string  `json:"key" parquet:"key"`
	RunID  string  `json:"run_id" parquet:"run_id"`
	Epoch  int64   `json:"epoch" parquet:"epoch"`
	Index  int64   `json:"index" parquet:"index"`
	K      int64   `json:"k" parquet:"k"`
	TaskID string  `json:"task_id" parquet:"task_id"`
	Reward float64 `json:"reward" parquet:"reward"`
	// Sample numbers the rollout's samples from 0; Steps are the steps
	// (model calls answered, from 0) it holds.
	Sample             int64     `json:"sample" parquet:"sample"`
	Steps              []int32   `json:"steps" parquet:"steps,list"`
	Interleavable      bool      `json:"interleavable" parquet:"interleavable"`
	PromptIDs          []int32   `json:"prompt_ids" parquet:"prompt_ids,list"`
	PromptMask         []int32   `json:"prompt_mask" parquet:"prompt_mask,list"`
	CompletionIDs      []int32   `json:"completion_ids" parquet:"completion_ids,list"`
	CompletionMask     []int32   `json:"completion_mask" parquet:"completion_mask,list"`
	CompletionLogprobs []float32 `json:"completion_logprobs" parquet:"completion_logprobs,list"`
	// PolicyVersion is the oldest policy version among the sample's steps;
	// -1 when unknown.
	PolicyVersion int64 `json:"policy_version" parquet:"policy_version"`
}

// Samples reads a run's training samples, as view makes them
// (trajectory.ViewInterleaved or ViewSteps), from the traces of its
// successful rollouts that have token data (runs with --trace-tokens).
func Samples(ctx context.Context, store results.Store, runID, view string) ([]SampleRow, error) {
	if _, err := (trajectory.Trajectory{}).Samples(view); err != nil {
		return nil, err
	}
	recs, err := store.List(ctx, runID)
	if err != nil {
		return nil, err
	}
	var out []SampleRow
	for _, rec := range recs {
		if rec.Status != "ok" || rec.Trace == "" {
			continue
		}
		tr, err := store.Trace(ctx, rec.RunID, rec.Key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", rec.Key, err)
		}
		traj := trajectory.FromTurns(tr.Turns)
		samples, _ := traj.Samples(view)
		for i, s := range samples {
			row := SampleRow{Key: rec.Key, RunID: rec.RunID, Epoch: int64(rec.Epoch), Index: rec.Index, K: int64(rec.K),
				TaskID: rec.TaskID, Reward: rec.Reward, Sample: int64(i), Interleavable: traj.Interleavable,
				PromptIDs: s.PromptIDs, PromptMask: int32s(s.PromptMask), CompletionIDs: s.CompletionIDs,
				CompletionMask: int32s(s.CompletionMask), CompletionLogprobs: s.CompletionLogprobs, PolicyVersion: -1}
			for _, st := range s.Steps {
				row.Steps = append(row.Steps, int32(st))
				if v := traj.Steps[st].PolicyVersion; v != nil && (row.PolicyVersion < 0 || *v < row.PolicyVersion) {
					row.PolicyVersion = *v
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

func int32s(a []int) []int32 {
	out := make([]int32, len(a))
	for i, v := range a {
		out[i] = int32(v)
	}
	return out
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
	if rec.UnpricedTurns == 0 {
		row.Cost = &rec.CostUSD
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
	traj := trajectory.FromTurns(tr.Turns)
	row.Steps, row.Interleavable, row.PrefixBreaks = int64(len(traj.Steps)), traj.Interleavable, int64(len(traj.PrefixBreaks))
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

// Write writes rows (Rows or SampleRows) to w as "jsonl" (one JSON object
// a line) or "parquet" (one row group, zstd-compressed columns).
func Write[R Row | SampleRow](w io.Writer, format string, rows []R) error {
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
		pw := parquet.NewGenericWriter[R](w, parquet.Compression(&parquet.Zstd))
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
