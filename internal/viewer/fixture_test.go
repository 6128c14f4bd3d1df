package viewer_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/workflows"
)

// The fixture's runs: an evaluation with failures, and a training run of
// three epochs, the last still running.
const (
	evalRun  = "eval-fixture"
	trainRun = "train-fixture"
	// providerKey is the provider's API key the worker had; the viewer is
	// told of it. plantedKey is a credential a harness printed.
	providerKey = "prov-key-4f1c9a77e2d0b35a"
	plantedKey  = "sk-planted0123456789abcdefSECRET"
)

var t0 = time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

func text(s string) []dialects.Part { return []dialects.Part{{Type: "text", Text: s}} }

// toolTrace is the trace of an agent that computes with the calculator tool
// and answers.
func toolTrace(key, task string, answer string) trace.Rollout {
	sys := dialects.Message{Role: "system", Content: text("You are a careful agent.")}
	user := dialects.Message{Role: "user", Content: text("What is 17 * 23? Use the calculator.")}
	call := dialects.Message{Role: "assistant", Reasoning: "I should multiply with the tool.",
		ToolCalls: []dialects.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"17*23"}`}}}
	result := dialects.Message{Role: "tool", ToolCallID: "call_1", Content: text("391")}
	final := dialects.Message{Role: "assistant", Content: text("The answer is " + answer + ".")}
	return trace.Rollout{
		Key: key, TaskID: task, StartedAt: t0, EndedAt: t0.Add(3 * time.Second),
		Turns: []trace.Turn{
			{Index: 0, Dialect: "chat", Route: "/v1/chat/completions", Status: 200, Attempts: 1,
				Request:   dialects.Request{Model: "mock", Messages: []dialects.Message{sys, user}},
				Response:  dialects.Response{Message: call, FinishReason: "tool_calls", Usage: dialects.Usage{InputTokens: 40, OutputTokens: 12}},
				CostUSD:   ptr(0.000088),
				StartedAt: t0, Latency: 420 * time.Millisecond, TTFT: 130 * time.Millisecond},
			{Index: 1, Dialect: "chat", Route: "/v1/chat/completions", Status: 200, Attempts: 1,
				Request:   dialects.Request{Model: "mock", Messages: []dialects.Message{sys, user, call, result}},
				Response:  dialects.Response{Message: final, FinishReason: "stop", Usage: dialects.Usage{InputTokens: 60, OutputTokens: 8}},
				StartedAt: t0.Add(time.Second), Latency: 310 * time.Millisecond, TTFT: 90 * time.Millisecond},
		},
		Harness: trace.Harness{ExitCode: 0, Stdout: "agent: done\nOPENAI_API_KEY=" + plantedKey + "\n", Answer: answer, Duration: 3 * time.Second},
		Score:   "expected 391, got " + answer,
	}
}

// writeFixture fills store with the fixture's runs.
func writeFixture(t *testing.T, store results.Store) {
	t.Helper()
	ctx := context.Background()
	put := func(rec results.Record, tr *trace.Rollout) {
		_, _, err := store.Put(ctx, rec, tr)
		require.NoError(t, err)
	}

	// The evaluation: 6 tasks × 2 rollouts; task 4 fails with a harness
	// exit, task 5 times out; one rollout needed a second attempt after the
	// provider failed its first.
	var agg workflows.Result
	for i := range int64(6) {
		for k := range 2 {
			key := rollout.Key(evalRun, 0, i, k)
			task := fmt.Sprintf("arith-%d", i)
			rec := results.Record{Key: key, RunID: evalRun, Index: i, K: k, TaskID: task, Status: rollout.StatusOK,
				Turns: 2, InputTokens: 100, OutputTokens: 20, DurationMS: 3000 + 100*i, Model: "mock-1",
				CostUSD: 0.0005, Attempt: 1, FinishedAt: t0.Add(time.Duration(i*2+int64(k)) * time.Second)}
			tr := toolTrace(key, task, "391")
			switch {
			case i == 4:
				rec.Status, rec.ErrorKind, rec.Error = rollout.StatusError, rollout.KindHarnessExit, "harness exited with code 3"
				tr.Harness.ExitCode = 3
				tr.Harness.Stderr = "Traceback: boom\nAuthorization: Bearer " + providerKey + "\n"
			case i == 5:
				rec.Status, rec.ErrorKind, rec.Error = rollout.StatusError, rollout.KindTimeout, "harness timed out after 60s"
				rec.CostUSD, rec.UnpricedTurns = 0, 2
				tr.Harness.TimedOut, tr.Harness.ExitCode = true, -1
			case i == 3 && k == 1:
				rec.Reward, rec.Metrics = 0.5, map[string]float64{"tests": 0.5, "tests.passed": 1}
				tr = toolTrace(key, task, "392")
			default:
				rec.Reward, rec.Metrics = 1, map[string]float64{"tests": 1, "tests.passed": 2}
			}
			tr.Reward = rec.Reward
			if i == 2 && k == 0 {
				first := toolTrace(key, task, "")
				first.Turns = first.Turns[:1]
				first.Turns[0].Status, first.Turns[0].UpstreamFailure = 502, trace.UpstreamStatus
				_, err := store.PutAttempt(ctx, evalRun, results.Attempt{N: 1, Error: "upstream: provider answered 502", Rollout: first})
				require.NoError(t, err)
				rec.Attempt = 2
				// The second attempt's first call fell back to the
				// policy's second provider.
				tr.Turns[0].Provider, tr.Turns[0].FallbackFrom = "default", []string{"primary"}
				tr.Workspace = []string{"[environment] storage_mb is not honoured: no runtime here limits a sandbox's disk"}
				// A task of two steps, the first a gate only.
				tr.Steps = []trace.Step{
					{Name: "scaffold", Turns: 1, Uncounted: true, Verifier: trace.Verifier{Reward: 1, Metrics: map[string]float64{"reward": 1}}},
					{Name: "implement", Turns: 2, Verifier: trace.Verifier{Reward: 1, Metrics: map[string]float64{"reward": 1}}},
				}
				tr.Artifacts = fixtureArtifacts(t)
			}
			put(rec, &tr)
			agg.Rollouts++
		}
	}
	agg.RunID, agg.Taskset, agg.Model, agg.Tasks = evalRun, "arith", "mock-1", 6
	agg.OK, agg.Failed = 8, 4
	agg.CostUSD, agg.UnpricedRollouts = 0.005, 2
	agg.StartedAt, agg.EndedAt = t0.Add(-5*time.Second), t0.Add(20*time.Second)
	agg.PassAtK = []workflows.PassAt{{K: 1, Value: 0.58}, {K: 2, Value: 0.67}}
	require.NoError(t, store.WriteSummary(ctx, evalRun, agg))

	// The training run: epochs 0 and 1 finished, epoch 2 half done.
	for epoch := range 3 {
		n := int64(4)
		if epoch == 2 {
			n = 2
		}
		var sum, ss float64
		for i := range n {
			key := rollout.Key(trainRun, epoch, i, 0)
			reward := float64(epoch+1) * 0.25
			if i%2 == 1 {
				reward += 0.1
			}
			sum += reward
			tr := toolTrace(key, fmt.Sprintf("arith-%d", i), "391")
			put(results.Record{Key: key, RunID: trainRun, Epoch: epoch, Index: i, TaskID: fmt.Sprintf("arith-%d", i),
				Status: rollout.StatusOK, Reward: reward, Turns: 2, Attempt: 1, Model: "mock-1",
				FinishedAt: t0.Add(time.Duration(epoch) * time.Minute)}, &tr)
		}
		mean := sum / float64(n)
		ss = 0.05 * 0.05
		if epoch < 2 {
			require.NoError(t, store.WriteEpoch(ctx, trainRun, epoch, workflows.EpochResult{Epoch: epoch, Ran: n,
				Run: workflows.Result{RunID: trainRun, Taskset: "arith", Model: "mock-1", Rollouts: n, OK: n,
					MeanReward: mean, StdReward: ss * 20}}))
		}
	}
}

// fixtureArtifacts are what an attempt left in /logs/artifacts: a report
// holding a credential the agent printed, a picture, JSON, a binary file
// holding the provider's key, and a file too large to keep.
func fixtureArtifacts(t *testing.T) []trace.Artifact {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 24))
	for x := range 40 {
		img.Set(x, x*24/40, color.RGBA{B: 200, A: 255})
	}
	var pic bytes.Buffer
	require.NoError(t, png.Encode(&pic, img))
	report := "all checks passed\nOPENAI_API_KEY=" + plantedKey + "\n"
	blob := []byte("\x00\x01key:" + providerKey)
	b64 := base64.StdEncoding.EncodeToString
	return []trace.Artifact{
		{Path: "blob.bin", Size: int64(len(blob)), MediaType: "application/octet-stream", Encoding: trace.ArtifactBase64, Content: b64(blob)},
		{Path: "charts/plot.png", Size: int64(pic.Len()), MediaType: "image/png", Encoding: trace.ArtifactBase64, Content: b64(pic.Bytes())},
		{Path: "huge.bin", Size: 9 << 20, Omitted: "past the 8 MiB an attempt keeps"},
		{Path: "report.txt", Size: int64(len(report)), MediaType: "text/plain; charset=utf-8", Encoding: trace.ArtifactText, Content: report},
		{Path: "result.json", Size: 24, MediaType: "application/json", Encoding: trace.ArtifactText, Content: `{"passed":3,"failed":0}` + "\n"},
	}
}

func ptr[T any](v T) *T { return &v }
