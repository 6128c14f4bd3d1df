// Package sft makes a run's rollouts into a chat-messages dataset for
// supervised fine-tuning: one conversation per rollout, in OpenAI's chat
// format (messages, tool calls, tools) that TRL, Axolotl and OpenAI's
// fine-tuning read, with the rollout's key, task and reward.
//
// A rollout's conversation is its final one: the messages of its last
// answered model call and the answer. Only text is kept (a message's
// images are left out).
package sft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

// Conversation is one line of the dataset.
type Conversation struct {
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	Key      string    `json:"key"`
	TaskID   string    `json:"task_id"`
	Reward   float64   `json:"reward"`
}

// Message is a chat message. A developer message is written as system,
// which every chat template knows.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is the model's visible reasoning, in the field the
	// chat templates of reasoning models (Qwen3, DeepSeek) read.
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ToolCall is an assistant message's tool call; Arguments is JSON text.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool called and its arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered to the model.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is a tool's name, description and JSON-schema parameters.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// DefaultPassThreshold is the reward at or above which a run counts a
// rollout as passed unless it was configured otherwise.
const DefaultPassThreshold = 1.0

// Filter picks the rollouts to keep; its zero value keeps all.
type Filter struct {
	// Passed keeps only rollouts that passed: succeeded, with a reward of
	// at least MinReward if set, else DefaultPassThreshold.
	Passed bool
	// MinReward, when set, keeps only rollouts with at least this reward.
	MinReward *float64
}

// Keep reports whether f keeps the rollout of rec.
func (f Filter) Keep(rec results.Record) bool {
	least := f.MinReward
	if f.Passed {
		if rec.Status != rollout.StatusOK {
			return false
		}
		if least == nil {
			pass := DefaultPassThreshold
			least = &pass
		}
	}
	return least == nil || rec.Reward >= *least
}

// Each calls yield with the conversation of each rollout of a run that f
// keeps, in the order they were stored, and stops at the first error. A
// rollout without a trace, or without an answered call, has none.
func Each(ctx context.Context, store results.Store, runID string, f Filter, yield func(Conversation) error) error {
	recs, err := store.List(ctx, runID)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if !f.Keep(rec) || rec.Trace == "" {
			continue
		}
		tr, err := store.Trace(ctx, rec.RunID, rec.Key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("conversation of %s: %w", rec.Key, err)
		}
		c, ok := FromRollout(rec, tr)
		if !ok {
			continue
		}
		if err := yield(c); err != nil {
			return err
		}
	}
	return nil
}

// FromRollout is a rollout's final conversation: its last answered call's
// messages and answer; false when no call was answered.
func FromRollout(rec results.Record, tr *trace.Rollout) (Conversation, bool) {
	for i := len(tr.Turns) - 1; i >= 0; i-- {
		t := tr.Turns[i]
		if t.Status/100 != 2 || t.Limit != "" {
			continue
		}
		c := Conversation{Key: rec.Key, TaskID: rec.TaskID, Reward: rec.Reward}
		for _, m := range t.Request.Messages {
			c.Messages = append(c.Messages, messageOf(m))
		}
		answer := messageOf(t.Response.Message)
		answer.Role = dialects.RoleAssistant
		c.Messages = append(c.Messages, answer)
		for _, tool := range t.Request.Tools {
			c.Tools = append(c.Tools, Tool{Type: "function", Function: Function{Name: tool.Name, Description: tool.Description, Parameters: tool.Parameters}})
		}
		return c, true
	}
	return Conversation{}, false
}

func messageOf(m dialects.Message) Message {
	out := Message{Role: m.Role, Content: m.Text(), ReasoningContent: m.Reasoning, ToolCallID: m.ToolCallID, Name: m.Name}
	if out.Role == dialects.RoleDeveloper {
		out.Role = dialects.RoleSystem
	}
	if out.Content == "" {
		out.Content = m.Refusal
	}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: c.Name, Arguments: c.Arguments}})
	}
	return out
}
