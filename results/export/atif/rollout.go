package atif

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/trace"
)

// FromRollout is the trajectory of one rollout: rec is its record, tr the
// trace of the attempt that made it, agent the agent system to name.
//
// Each call's request holds the whole conversation so far; the messages
// after the part the previous call already showed (its request and its
// answer) become steps. A harness that rewrote its conversation sends
// earlier messages again: they become steps again, its assistant messages
// marked as copied context.
func FromRollout(rec results.Record, tr *trace.Rollout, agent Agent) Trajectory {
	b := builder{calls: map[string]int{}}
	var prev []dialects.Message
	for _, t := range tr.Turns {
		msgs := t.Request.Messages
		at := timestamp(t.StartedAt)
		for _, m := range msgs[commonPrefix(prev, msgs):] {
			b.addMessage(m, at)
		}
		prev = msgs
		if t.Status/100 == 2 && t.Limit == "" {
			b.addAnswer(t, at)
			prev = append(slices.Clip(msgs), t.Response.Message)
		} else {
			b.addFailure(t, at)
		}
	}
	agent.ModelName = rec.Model
	agent.ToolDefinitions = toolDefinitions(tr.Turns)
	return Trajectory{
		SchemaVersion: SchemaVersion, SessionID: rec.Key, Agent: agent, Steps: b.steps,
		FinalMetrics: finalMetrics(b.steps, tr.Turns),
		Extra: &RolloutInfo{RunID: rec.RunID, TaskID: rec.TaskID, Epoch: rec.Epoch, Index: rec.Index, K: rec.K,
			Attempt: rec.Attempt, Status: rec.Status, Reward: rec.Reward, Metrics: rec.Metrics,
			ErrorKind: rec.ErrorKind, Error: rec.Error},
	}
}

// builder appends steps, numbering them, and knows which step made each
// tool call, so that a tool result joins that step's observation.
type builder struct {
	steps []Step
	calls map[string]int // tool call id → index in steps
}

func (b *builder) add(s Step) {
	s.StepID = len(b.steps) + 1
	for _, c := range s.ToolCalls {
		b.calls[c.ToolCallID] = len(b.steps)
	}
	b.steps = append(b.steps, s)
}

// addMessage adds a message the harness sent.
func (b *builder) addMessage(m dialects.Message, at string) {
	switch m.Role {
	case dialects.RoleTool:
		res := ObservationResult{SourceCallID: m.ToolCallID, Content: m.Text()}
		i, ok := b.calls[m.ToolCallID]
		if !ok {
			// A result whose call no step made: a system step of its own.
			res.SourceCallID = ""
			b.add(Step{Timestamp: at, Source: SourceSystem, Observation: &Observation{Results: []ObservationResult{res}}})
			return
		}
		if b.steps[i].Observation == nil {
			b.steps[i].Observation = &Observation{}
		}
		b.steps[i].Observation.Results = append(b.steps[i].Observation.Results, res)
	case dialects.RoleAssistant:
		s := agentStep(m, at)
		s.IsCopiedContext = true
		b.add(s)
	case dialects.RoleUser:
		b.add(Step{Timestamp: at, Source: SourceUser, Message: m.Text()})
	default: // system, developer
		b.add(Step{Timestamp: at, Source: SourceSystem, Message: m.Text()})
	}
}

// addAnswer adds the agent step of an answered call.
func (b *builder) addAnswer(t trace.Turn, at string) {
	s := agentStep(t.Response.Message, at)
	s.ModelName = t.Response.Model
	s.Metrics = metrics(t)
	one := 1
	s.LLMCallCount = &one
	s.Extra = &TurnInfo{Turn: t.Index, FinishReason: t.Response.FinishReason, PolicyVersion: t.PolicyVersion, Provider: t.Provider}
	b.add(s)
}

// addFailure adds a system step saying why a call got no answer.
func (b *builder) addFailure(t trace.Turn, at string) {
	why := t.Error
	if t.Limit != "" {
		why = "the rollout's " + t.Limit + " limit refused it"
	}
	b.add(Step{Timestamp: at, Source: SourceSystem, Message: fmt.Sprintf("model call %d failed: %s", t.Index, why),
		Extra: &TurnInfo{Turn: t.Index, Status: t.Status, Error: t.Error, Limit: t.Limit}})
}

func agentStep(m dialects.Message, at string) Step {
	s := Step{Timestamp: at, Source: SourceAgent, Message: m.Text(), ReasoningContent: m.Reasoning}
	if s.Message == "" {
		s.Message = m.Refusal
	}
	for _, c := range m.ToolCalls {
		s.ToolCalls = append(s.ToolCalls, ToolCall{ToolCallID: c.ID, FunctionName: c.Name, Arguments: arguments(c.Arguments)})
	}
	return s
}

// arguments is a tool call's arguments as a JSON object: {} for none,
// {"raw": text} for text that is not a JSON object.
func arguments(text string) json.RawMessage {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
		return json.RawMessage(text)
	}
	raw, _ := json.Marshal(map[string]string{"raw": text})
	return raw
}

// metrics are an answered call's usage, cost and token data; nil when it
// reported none.
func metrics(t trace.Turn) *Metrics {
	m := &Metrics{CostUSD: t.CostUSD}
	if u := t.Response.Usage; u.InputTokens+u.OutputTokens > 0 {
		m.PromptTokens, m.CompletionTokens = &u.InputTokens, &u.OutputTokens
		if u.CacheReadTokens > 0 {
			m.CachedTokens = &u.CacheReadTokens
		}
		if u.ReasoningTokens > 0 || u.CacheWriteTokens > 0 {
			m.Extra = &MetricsExtras{ReasoningTokens: u.ReasoningTokens, CacheCreationInputTokens: u.CacheWriteTokens}
		}
	}
	if tok := t.Tokens; tok != nil {
		m.PromptTokenIDs, m.CompletionTokenIDs, m.Logprobs = tok.PromptIDs, tok.CompletionIDs, tok.Logprobs
	}
	if m.PromptTokens == nil && m.CostUSD == nil && len(m.PromptTokenIDs)+len(m.CompletionTokenIDs)+len(m.Logprobs) == 0 {
		return nil
	}
	return m
}

// finalMetrics sums the agent steps' metrics; the cost only when every
// call's cost is known.
func finalMetrics(steps []Step, turns []trace.Turn) *FinalMetrics {
	f := &FinalMetrics{TotalSteps: len(steps)}
	for _, s := range steps {
		if m := s.Metrics; m != nil {
			f.TotalPromptTokens += deref(m.PromptTokens)
			f.TotalCompletionTokens += deref(m.CompletionTokens)
			f.TotalCachedTokens += deref(m.CachedTokens)
		}
	}
	if usd, unpriced := trace.Cost(turns); unpriced == 0 {
		f.TotalCostUSD = &usd
	}
	return f
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// toolDefinitions are the tools of the last call that offered any.
func toolDefinitions(turns []trace.Turn) []ToolDefinition {
	for i := len(turns) - 1; i >= 0; i-- {
		if tools := turns[i].Request.Tools; len(tools) > 0 {
			out := make([]ToolDefinition, len(tools))
			for j, t := range tools {
				out[j] = ToolDefinition{Type: "function", Function: Function{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
			}
			return out
		}
	}
	return nil
}

// commonPrefix counts the messages at the start of next that repeat prev.
func commonPrefix(prev, next []dialects.Message) int {
	n := 0
	for n < len(prev) && n < len(next) && sameMessage(prev[n], next[n]) {
		n++
	}
	return n
}

// sameMessage compares what a harness keeps when it sends a message again:
// role, text (its ends trimmed), tool call ids and names; not reasoning,
// which harnesses drop, nor arguments, which they re-encode.
func sameMessage(a, b dialects.Message) bool {
	if a.Role != b.Role || a.ToolCallID != b.ToolCallID || len(a.ToolCalls) != len(b.ToolCalls) ||
		strings.TrimSpace(a.Text()) != strings.TrimSpace(b.Text()) {
		return false
	}
	for i, c := range a.ToolCalls {
		if c.ID != b.ToolCalls[i].ID || c.Name != b.ToolCalls[i].Name {
			return false
		}
	}
	return true
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
