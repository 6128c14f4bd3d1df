package atif_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export/atif"
	"github.com/evalflow/evalflow/results/storetest"
	"github.com/evalflow/evalflow/trace"
)

func text(role, s string) dialects.Message {
	return dialects.Message{Role: role, Content: []dialects.Part{{Type: dialects.PartText, Text: s}}}
}

// toolCalling is a rollout of two traced calls: the first asks for a tool,
// the second answers with the tool's result.
func toolCalling(key string) *trace.Rollout {
	start := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	call := dialects.Message{Role: dialects.RoleAssistant, Reasoning: "Multiply.",
		ToolCalls: []dialects.ToolCall{{ID: "call_1", Name: "multiply", Arguments: `{"a":6,"b":7}`}}}
	result := dialects.Message{Role: dialects.RoleTool, ToolCallID: "call_1", Content: []dialects.Part{{Type: dialects.PartText, Text: "42"}}}
	first := []dialects.Message{text("system", "You are a calculator."), text("user", "What is 6*7?")}
	tools := []dialects.Tool{{Name: "multiply", Description: "a*b", Parameters: json.RawMessage(`{"type":"object"}`)}}
	cost := 0.001
	return &trace.Rollout{Key: key, TaskID: "task-0", Turns: []trace.Turn{
		{Index: 0, Status: 200, StartedAt: start, CostUSD: &cost,
			Request:  dialects.Request{Messages: first, Tools: tools},
			Response: dialects.Response{Model: "qwen3", Message: call, FinishReason: dialects.FinishToolCalls, Usage: dialects.Usage{InputTokens: 50, OutputTokens: 10, CacheReadTokens: 20}},
			Tokens:   &dialects.Tokens{PromptIDs: []int32{1, 2, 3}, CompletionIDs: []int32{4, 5}, Logprobs: dialects.Float32s{-0.5, -0.25}}},
		{Index: 1, Status: 200, StartedAt: start.Add(time.Second), CostUSD: &cost,
			Request:  dialects.Request{Messages: append(append(first[:2:2], call), result), Tools: tools},
			Response: dialects.Response{Model: "qwen3", Message: text("assistant", "6*7 = 42"), FinishReason: dialects.FinishStop, Usage: dialects.Usage{InputTokens: 70, OutputTokens: 5}},
			Tokens:   &dialects.Tokens{PromptIDs: []int32{1, 2, 3, 4, 5, 6}, CompletionIDs: []int32{7}, Logprobs: dialects.Float32s{-0.125}}},
	}}
}

// exported writes the tool-calling rollout through a store and Each, and
// returns its trajectory.json as a JSON value.
func exported(t *testing.T) any {
	ctx := context.Background()
	s := storetest.Files(t, "")
	defer s.Close()
	rec := storetest.Record("run", 0, 0)
	rec.Model = "qwen3"
	_, _, err := s.Put(ctx, rec, toolCalling(rec.Key))
	require.NoError(t, err)
	_, _, err = s.Put(ctx, storetest.Failure(storetest.Record("run", 1, 0), 1), nil)
	require.NoError(t, err)

	dir := t.TempDir()
	skipped, err := atif.Each(ctx, s, "run", atif.Agent{Name: "evalflow", Version: "test"}, func(tr atif.Trajectory) error {
		return atif.WriteFile(dir, tr)
	})
	require.NoError(t, err)
	assert.Equal(t, 1, skipped, "the rollout without a trace has no trajectory")
	f, err := os.Open(filepath.Join(dir, "run~0~0~0", "trajectory.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	return doc
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile("testdata/atif-v1.7.schema.json")
	require.NoError(t, err)
	return sch
}

// validate checks doc against ATIF's schema, then against what the schema
// cannot say: step ids 1, 2, 3, … and observations that answer tool calls
// of their own step (the rules of Harbor's Trajectory validators).
func validate(sch *jsonschema.Schema, doc any) error {
	if err := sch.Validate(doc); err != nil {
		return err
	}
	steps := doc.(map[string]any)["steps"].([]any)
	for i, s := range steps {
		step := s.(map[string]any)
		if id, _ := step["step_id"].(json.Number).Int64(); id != int64(i+1) {
			return fmt.Errorf("steps[%d].step_id = %d, want %d", i, id, i+1)
		}
		calls := map[any]bool{}
		for _, c := range asList(step["tool_calls"]) {
			calls[c.(map[string]any)["tool_call_id"]] = true
		}
		obs, _ := step["observation"].(map[string]any)
		for _, r := range asList(obs["results"]) {
			if id, ok := r.(map[string]any)["source_call_id"]; ok && !calls[id] {
				return fmt.Errorf("step %d: result for %v, not a tool call of the step", i+1, id)
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// An exported trajectory of a tool-calling rollout is valid ATIF: a step
// per message and per answered call, the tool's result as the observation
// of the step that called it, usage, cost and token data in metrics.
func TestATIFExportValidatesAgainstTheSchema(t *testing.T) {
	doc := exported(t)
	require.NoError(t, validate(compileSchema(t), doc))

	b, err := json.Marshal(doc)
	require.NoError(t, err)
	var tr atif.Trajectory
	require.NoError(t, json.Unmarshal(b, &tr))
	assert.Equal(t, "ATIF-v1.7", tr.SchemaVersion)
	assert.Equal(t, "run/0/0/0", tr.SessionID)
	assert.Equal(t, atif.Agent{Name: "evalflow", Version: "test", ModelName: "qwen3", ToolDefinitions: []atif.ToolDefinition{
		{Type: "function", Function: atif.Function{Name: "multiply", Description: "a*b", Parameters: json.RawMessage(`{"type":"object"}`)}}}}, tr.Agent)
	require.Len(t, tr.Steps, 4)
	var sources []string
	for _, s := range tr.Steps {
		sources = append(sources, s.Source)
	}
	assert.Equal(t, []string{"system", "user", "agent", "agent"}, sources)

	call := tr.Steps[2]
	assert.Equal(t, "Multiply.", call.ReasoningContent)
	assert.Equal(t, []atif.ToolCall{{ToolCallID: "call_1", FunctionName: "multiply", Arguments: json.RawMessage(`{"a":6,"b":7}`)}}, call.ToolCalls)
	assert.Equal(t, &atif.Observation{Results: []atif.ObservationResult{{SourceCallID: "call_1", Content: "42"}}}, call.Observation)
	require.NotNil(t, call.Metrics)
	assert.Equal(t, 50, *call.Metrics.PromptTokens)
	assert.Equal(t, 20, *call.Metrics.CachedTokens)
	assert.Equal(t, []int32{1, 2, 3}, call.Metrics.PromptTokenIDs)
	assert.Equal(t, []int32{4, 5}, call.Metrics.CompletionTokenIDs)
	assert.Equal(t, []float32{-0.5, -0.25}, call.Metrics.Logprobs)
	assert.Equal(t, "2026-11-01T12:00:00Z", call.Timestamp)
	assert.Equal(t, "6*7 = 42", tr.Steps[3].Message)

	require.NotNil(t, tr.FinalMetrics)
	assert.Equal(t, 120, tr.FinalMetrics.TotalPromptTokens)
	assert.Equal(t, 15, tr.FinalMetrics.TotalCompletionTokens)
	assert.InDelta(t, 0.002, *tr.FinalMetrics.TotalCostUSD, 1e-12)
	assert.Equal(t, 4, tr.FinalMetrics.TotalSteps)
	require.NotNil(t, tr.Extra)
	assert.Equal(t, atif.RolloutInfo{RunID: "run", TaskID: "task-0", Status: "ok", Reward: 1,
		Metrics: map[string]float64{"tests": 1}}, *tr.Extra)
}

// The schema refuses a trajectory that is not ATIF, so a passing export
// proves something.
func TestATIFSchemaRefusesBrokenTrajectories(t *testing.T) {
	sch := compileSchema(t)
	step := func(doc map[string]any, i int) map[string]any { return doc["steps"].([]any)[i].(map[string]any) }
	cases := map[string]func(doc map[string]any){
		"no agent":                   func(doc map[string]any) { delete(doc, "agent") },
		"a step from a tool":         func(doc map[string]any) { step(doc, 0)["source"] = "tool" },
		"a field ATIF does not have": func(doc map[string]any) { step(doc, 2)["tool_output"] = "42" },
		"arguments as text":          func(doc map[string]any) { step(doc, 2)["tool_calls"].([]any)[0].(map[string]any)["arguments"] = "6*7" },
		"metrics on a user step":     func(doc map[string]any) { step(doc, 1)["metrics"] = map[string]any{"prompt_tokens": json.Number("1")} },
		"token ids packed as base64": func(doc map[string]any) {
			step(doc, 2)["metrics"].(map[string]any)["completion_token_ids"] = "BAAAAAUAAAA="
		},
		"a bad timestamp":       func(doc map[string]any) { step(doc, 2)["timestamp"] = "yesterday" },
		"step ids out of order": func(doc map[string]any) { step(doc, 1)["step_id"] = json.Number("7") },
		"an answer to another step's call": func(doc map[string]any) {
			step(doc, 3)["observation"] = map[string]any{"results": []any{map[string]any{"source_call_id": "call_1", "content": "42"}}}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			doc := exported(t).(map[string]any)
			require.NoError(t, validate(sch, doc), "valid before it is broken")
			breakIt(doc)
			assert.Error(t, validate(sch, doc))
		})
	}
}

// A call that failed is a system step saying why; an assistant message
// the harness sent that no call of the rollout answered is copied context.
func TestATIFFailedCallAndCopiedContext(t *testing.T) {
	history := []dialects.Message{text("user", "hi"), text("assistant", "hello from an earlier session"), text("user", "go on")}
	tr := &trace.Rollout{Turns: []trace.Turn{
		{Index: 0, Status: 200, Request: dialects.Request{Messages: history}, Response: dialects.Response{Message: text("assistant", "going")}},
		{Index: 1, Status: 502, Error: "upstream 502", Request: dialects.Request{Messages: append(history[:3:3], text("assistant", "going"), text("user", "more"))}},
	}}
	got := atif.FromRollout(results.Record{Key: "run/0/0/0", Status: "error"}, tr, atif.Agent{Name: "evalflow", Version: "test"})
	var summary []string
	for _, s := range got.Steps {
		summary = append(summary, fmt.Sprintf("%d %s %q copied=%v", s.StepID, s.Source, s.Message, s.IsCopiedContext))
	}
	assert.Equal(t, []string{
		`1 user "hi" copied=false`,
		`2 agent "hello from an earlier session" copied=true`,
		`3 user "go on" copied=false`,
		`4 agent "going" copied=false`,
		`5 user "more" copied=false`,
		`6 system "model call 1 failed: upstream 502" copied=false`,
	}, summary)
	assert.Nil(t, got.FinalMetrics.TotalCostUSD, "a call without usage has an unknown cost")
}
