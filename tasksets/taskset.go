// Package tasksets opens index-addressable task sources: JSONL files read
// lazily by offset, the bundled sample, and generated (possibly infinite) sets.
package tasksets

import (
	"context"
	"encoding/json"
)

// Infinite is the Len of a taskset with no end.
const Infinite int64 = -1

// Message is one chat message of a task's prompt.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Task is one problem a rollout solves.
type Task struct {
	ID       string          `json:"id"`
	Prompt   string          `json:"prompt,omitempty"`
	Messages []Message       `json:"messages,omitempty"`
	Answer   string          `json:"answer,omitempty"`
	Info     json.RawMessage `json:"info,omitempty"`
}

// Taskset is an index-addressable source of tasks. Task(i) is the same on every
// worker, so any worker can serve any index.
type Taskset interface {
	// Len is the number of tasks, or Infinite.
	Len() int64
	// Task returns task i, 0 <= i < Len().
	Task(ctx context.Context, i int64) (Task, error)
}
