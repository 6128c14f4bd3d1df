// Package tokenin runs multi-turn tool-calling rollouts through a worker
// (the interception, the built-in agent) against the vLLM-shaped test
// upstream serving a model family's real chat template and tokenizer,
// with --token-in or without, and measures what a trainer gets: prefix
// breaks, interleavable samples, the turns sent as tokens or as text (and
// why), whether each sample's ids read back as the conversation, and
// whether its mask is 1 on exactly the sampled tokens.
package tokenin

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
	"github.com/evalflow/evalflow/workflows"
)

// Script is the model every rollout talks to: three turns of tool calls
// and tool results, then an answer. Qwen3 reasons before each turn;
// Llama 3.1 calls one tool a turn (its template takes no more); Qwen3 and
// DeepSeek V3 call two tools at once on the second turn.
func Script(f chattemplate.Family) []vllmtest.Entry {
	calc := func(expr string) vllmtest.ToolCall {
		return vllmtest.ToolCall{Name: "calculator", Arguments: []byte(`{"expression": "` + expr + `"}`)}
	}
	read := vllmtest.ToolCall{Name: "read_file", Arguments: []byte(`{"path": "notes.txt"}`)}
	turns := []vllmtest.Turn{
		{ToolCalls: []vllmtest.ToolCall{calc("6 * 7")}},
		{ToolCalls: []vllmtest.ToolCall{calc("42 / 6"), read}},
		{ToolCalls: []vllmtest.ToolCall{calc("7 * 6")}},
		{Content: "The answer is 42."},
	}
	switch f.Name {
	case chattemplate.Qwen3.Name:
		for i, why := range []string{"The calculator computes it.", "Check it, and read the notes.", "Once more to be sure.", "All agree."} {
			turns[i].Reasoning = why
		}
	case chattemplate.Llama31.Name:
		turns[1].ToolCalls = turns[1].ToolCalls[:1]
	case chattemplate.DeepSeekV3.Name:
		turns[0].Content = "Let me compute it."
	}
	return []vllmtest.Entry{{Match: "", Turns: turns}}
}

// StartWorker starts a worker polling queue whose provider is up and
// whose harness is agent (the built-in agent's command line), storing
// rollouts under runsDir.
func StartWorker(c client.Client, queue string, up *vllmtest.Server, runsDir string, agent []string) (*wiring.Worker, error) {
	w, err := wiring.NewWorker(c, wiring.Config{
		TaskQueue: queue, RunsDir: runsDir, BaseURL: up.BaseURL, MaxRollouts: 16,
		DefaultHarness: agent, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	return w, w.Start()
}

// Config is one run of rollouts.
type Config struct {
	// Queue is a queue a worker of StartWorker polls.
	Queue    string
	RunID    string
	Upstream *vllmtest.Server
	Family   chattemplate.Family
	// RunsDir is the worker's run store.
	RunsDir  string
	Rollouts int
	TokenIn  bool
}

// Figures are what a run of rollouts gave a trainer.
type Figures struct {
	Family   string `json:"family"`
	TokenIn  bool   `json:"token_in"`
	Rollouts int    `json:"rollouts"`
	// Failed counts rollouts that did not finish ok.
	Failed int `json:"failed"`
	// Turns counts answered model calls, AsTokens those whose prompt went
	// as token ids, AsText the others by why (the turn's token_in_text;
	// a rollout's first call has nothing to extend).
	Turns    int            `json:"turns"`
	AsTokens int            `json:"as_tokens"`
	AsText   map[string]int `json:"as_text"`
	// PrefixBreaks sums the trajectories' prefix breaks; OneSample counts
	// the rollouts that are interleavable and one sample.
	PrefixBreaks int `json:"prefix_breaks"`
	OneSample    int `json:"one_sample"`
	// Samples counts interleaved samples; Detokenized those whose ids read
	// back (/detokenize) as the conversation's text; Masked those whose
	// mask is 1 on exactly the sampled tokens.
	Samples     int `json:"samples"`
	Detokenized int `json:"detokenized"`
	Masked      int `json:"masked"`
	// Problems describes the first samples that failed a check.
	Problems []string `json:"problems,omitempty"`
}

// firstCall is why a rollout's first call goes as text.
const firstCall = "a rollout's first call"

// Run runs cfg's rollouts as an eval and measures them.
func Run(ctx context.Context, c client.Client, cfg Config) (Figures, error) {
	rc := workflows.RunConfig{
		RunID: cfg.RunID, Taskset: "sample", Tasks: int64(cfg.Rollouts), MaxConcurrent: 16, Model: cfg.Upstream.Model,
		Harness: rollout.HarnessConfig{TraceTokens: true, TokenIn: cfg.TokenIn, Timeout: 5 * time.Minute},
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.RunID, TaskQueue: cfg.Queue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, wiring.EvalWorkflowName, workflows.EvalInput{Config: rc})
	if err != nil {
		return Figures{}, fmt.Errorf("start eval: %w", err)
	}
	var res workflows.Result
	if err := run.Get(ctx, &res); err != nil {
		return Figures{}, fmt.Errorf("eval %s: %w", cfg.RunID, err)
	}
	store, err := results.Open(cfg.RunsDir)
	if err != nil {
		return Figures{}, err
	}
	recs, err := store.List(ctx, cfg.RunID)
	if err != nil {
		return Figures{}, err
	}
	fig := Figures{Family: cfg.Family.Name, TokenIn: cfg.TokenIn, Rollouts: len(recs), AsText: map[string]int{}}
	ck := checker{up: cfg.Upstream, family: cfg.Family}
	for _, rec := range recs {
		if rec.Status != rollout.StatusOK {
			fig.Failed++
			fig.problem(fmt.Sprintf("%s: %s %s", rec.Key, rec.Status, rec.Error))
		}
		tr, err := store.Trace(ctx, cfg.RunID, rec.Key)
		if err != nil {
			return fig, err
		}
		traj := trajectory.FromTurns(tr.Turns)
		turns := map[int]trace.Turn{}
		for i, t := range tr.Turns {
			turns[t.Index] = t
			if t.Status/100 != 2 || t.Limit != "" {
				continue
			}
			fig.Turns++
			switch {
			case t.TokenIn:
				fig.AsTokens++
			case t.TokenInText != "":
				fig.AsText[t.TokenInText]++
			case !cfg.TokenIn:
				fig.AsText["token-in off"]++
			case i == 0:
				fig.AsText[firstCall]++
			default:
				fig.AsText["no reason recorded"]++
			}
		}
		samples := traj.Interleaved()
		fig.PrefixBreaks += len(traj.PrefixBreaks)
		if traj.Interleavable && len(samples) == 1 {
			fig.OneSample++
		}
		for _, s := range samples {
			fig.Samples++
			if why := masked(traj, s); why != "" {
				fig.problem(fmt.Sprintf("%s: sample at step %d: %s", rec.Key, s.Steps[0], why))
			} else {
				fig.Masked++
			}
			why, err := ck.readsAsConversation(traj, s, turns)
			if err != nil {
				return fig, fmt.Errorf("%s: %w", rec.Key, err)
			}
			if why != "" {
				fig.problem(fmt.Sprintf("%s: sample at step %d: %s", rec.Key, s.Steps[0], why))
			} else {
				fig.Detokenized++
			}
		}
	}
	return fig, nil
}

func (f *Figures) problem(p string) {
	if len(f.Problems) < 8 {
		f.Problems = append(f.Problems, p)
	}
}
