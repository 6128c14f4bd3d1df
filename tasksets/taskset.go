// Package tasksets opens index-addressable task sources: JSONL files read
// lazily by offset, the bundled sample, and generated (possibly infinite) sets.
package tasksets

import (
	"context"
	"encoding/json"
	"time"
)

// Infinite is the Len of a taskset with no end.
const Infinite int64 = -1

// Message is one chat message of a task's prompt.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Task is one problem a rollout solves: a prompt with a reference answer, or
// an instruction with a starting workspace and a verifier (a task directory
// in the Harbor layout, or a JSONL task naming its workspace and verify
// command). Paths are absolute, on the worker that resolved the task.
type Task struct {
	ID       string          `json:"id"`
	Prompt   string          `json:"prompt,omitempty"`
	Messages []Message       `json:"messages,omitempty"`
	Answer   string          `json:"answer,omitempty"`
	Info     json.RawMessage `json:"info,omitempty"`

	// Environment is the directory the starting workspace is prepared from
	// (a Harbor task's environment/: a Dockerfile and its build context, or
	// plain files copied as they are); "" starts from an empty workspace.
	Environment string `json:"environment,omitempty"`
	// Tests is the directory placed at /tests for the verifier only (a Harbor
	// task's tests/); the agent never sees it in an isolating runtime.
	Tests string `json:"tests,omitempty"`
	// Verify is the verifier's command, run in the workspace after the agent
	// (a Harbor task: "bash /tests/test.sh"); "" means the task is scored by
	// its rubric from the answer alone.
	Verify string `json:"verify,omitempty"`
	// Solution is the directory of the reference solution (solve.sh), run
	// by the oracle harness in place of an agent.
	Solution string `json:"solution,omitempty"`
	// AgentTimeout and VerifierTimeout are the task's own limits (Harbor's
	// [agent] and [verifier] timeout_sec); 0 leaves the run's.
	AgentTimeout    time.Duration `json:"agent_timeout,omitempty"`
	VerifierTimeout time.Duration `json:"verifier_timeout,omitempty"`
	// VerifierEnv is set for the verifier only (Harbor's [verifier.env]).
	VerifierEnv map[string]string `json:"verifier_env,omitempty"`

	// Tools are the MCP tool servers the agent gets (tools.go).
	Tools []ToolServer `json:"tools,omitempty"`
	// User is the simulated user the agent talks with; nil for none.
	User *User `json:"user,omitempty"`

	// Steps are a multi-step task's steps, in order (harbor_steps.go):
	// Prompt is then the first step's, and each step's tests go over
	// Tests. StepReward says how their verdicts make the rollout's
	// reward (StepRewardMean or StepRewardFinal).
	Steps      []Step `json:"steps,omitempty"`
	StepReward string `json:"step_reward,omitempty"`

	// Warnings name what of the task's definition evalflow does not carry
	// out (a Harbor task's [environment] storage_mb, skills_dir, …): the
	// task runs without it.
	Warnings []string `json:"warnings,omitempty"`
}

// Verified reports whether the task is scored by running a verifier.
func (t Task) Verified() bool { return t.Verify != "" }

// ForHarness is the task as the agent may see it: what it is asked, never
// the reference answer, the tests or the solution.
func (t Task) ForHarness() Task {
	return Task{ID: t.ID, Prompt: t.Prompt, Messages: t.Messages, Info: t.Info, Tools: t.Tools, User: t.User}
}

// Taskset is an index-addressable source of tasks. Task(i) is the same on every
// worker, so any worker can serve any index.
type Taskset interface {
	// Len is the number of tasks, or Infinite.
	Len() int64
	// Task returns task i, 0 <= i < Len().
	Task(ctx context.Context, i int64) (Task, error)
}
