package tasksets

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// multiStepTask is a three-step task's files, under name/: the task's
// tests fall back for the steps without their own, and min_reward gates
// the second step.
func multiStepTask(name string) map[string]string {
	return map[string]string{
		name + "/task.toml": `schema_version = "1.1"
multi_step_reward_strategy = "final"

[agent]
timeout_sec = 60

[[steps]]
name = "scaffold"
[steps.agent]
timeout_sec = 30.0

[[steps]]
name = "implement"
min_reward = { reward = 1.0, style = 0.5 }
contributes_to_reward = false
[steps.verifier]
timeout_sec = 20

[[steps]]
name = "document"
min_reward = 0.5
[steps.healthcheck]
command = "test -f /app/ready"
[steps.verifier]
user = "root"
`,
		name + "/tests/test.sh":                      "echo 1 > /logs/verifier/reward.txt\n",
		name + "/steps/scaffold/instruction.md":      "Make the scaffold.\n",
		name + "/steps/implement/instruction.md":     "Implement it.\n",
		name + "/steps/implement/tests/test.sh":      "echo 0 > /logs/verifier/reward.txt\n",
		name + "/steps/implement/solution/solve.sh":  "true\n",
		name + "/steps/document/instruction.md":      "Write the docs.\n",
		name + "/environment/app/docker-compose.yml": "services: {}\n",
	}
}

func TestHarborMultiStepTask(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, multiStepTask("steps"))
	h, err := OpenHarbor(root)
	require.NoError(t, err)
	task, err := h.Task(context.Background(), 0)
	require.NoError(t, err)

	dir := filepath.Join(root, "steps")
	assert.Equal(t, "Make the scaffold.\n", task.Prompt, "the agent starts with the first step's instruction")
	assert.Equal(t, StepRewardFinal, task.StepReward)
	assert.Equal(t, filepath.Join(dir, "tests"), task.Tests)
	assert.Equal(t, time.Minute, task.AgentTimeout)
	require.Len(t, task.Steps, 3)
	assert.Equal(t, Step{Name: "scaffold", Prompt: "Make the scaffold.\n", AgentTimeout: 30 * time.Second}, task.Steps[0])
	assert.Equal(t, Step{
		Name: "implement", Prompt: "Implement it.\n",
		Tests: filepath.Join(dir, "steps/implement/tests"), Solution: filepath.Join(dir, "steps/implement/solution"),
		VerifierTimeout: 20 * time.Second, MinReward: map[string]float64{"reward": 1, "style": 0.5}, Uncounted: true,
	}, task.Steps[1])
	assert.Equal(t, map[string]float64{"reward": 0.5}, task.Steps[2].MinReward)
	assert.Equal(t, []string{"[[steps]] document: healthcheck is not carried out", "[[steps]] document: [steps.verifier] user is not carried out"},
		task.Warnings, "what of a step evalflow does not carry out is named, never passed over")
	assert.NotContains(t, string(task.Info), "steps", "the steps, their tests and solutions are not in what the agent sees")
	assert.NotContains(t, string(task.Info), "multi_step")

	gate := task.Steps[1]
	assert.True(t, gate.Passes(map[string]float64{"reward": 1, "style": 0.5}))
	assert.False(t, gate.Passes(map[string]float64{"reward": 1, "style": 0.4}))
	assert.False(t, gate.Passes(map[string]float64{"reward": 1}), "a metric the verifier did not write counts as 0")
	assert.True(t, task.Steps[0].Passes(map[string]float64{"reward": 0}), "a step without min_reward never stops the rollout")
}

func TestHarborMultiStepTaskProblemsAreNamed(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(files map[string]string)
		wants string
	}{
		{"missing step instruction", func(f map[string]string) { delete(f, "t/steps/document/instruction.md") }, "steps/document/instruction.md is missing"},
		{"no tests to fall back on", func(f map[string]string) { delete(f, "t/tests/test.sh") }, "step scaffold has no tests/test.sh"},
		{"twice the same name", func(f map[string]string) {
			f["t/task.toml"] = "[[steps]]\nname = \"a\"\n[[steps]]\nname = \"a\"\n"
			f["t/steps/a/instruction.md"] = "A.\n"
		}, `name "a" is used twice`},
		{"a name that leaves steps/", func(f map[string]string) { f["t/task.toml"] = "[[steps]]\nname = \"../x\"\n" }, "name must be the name of a directory under steps/"},
		{"min_reward not a number", func(f map[string]string) {
			f["t/task.toml"] = "[[steps]]\nname = \"scaffold\"\nmin_reward = \"high\"\n"
		}, "min_reward must be a number or a table of numbers"},
		{"unknown strategy", func(f map[string]string) {
			f["t/task.toml"] = "multi_step_reward_strategy = \"max\"\n[[steps]]\nname = \"scaffold\"\n"
		}, `multi_step_reward_strategy must be "mean" or "final"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := multiStepTask("t")
			c.edit(files)
			root := t.TempDir()
			writeTree(t, root, files)
			_, err := OpenHarbor(root)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wants)
		})
	}
}

// A multi-step task needs no instruction.md of its own; a single-step one
// still does.
func TestHarborInstructionOptionalOnlyForSteps(t *testing.T) {
	root := t.TempDir()
	files := multiStepTask("multi")
	for k, v := range harborTask("single") {
		files[k] = v
	}
	delete(files, "single/instruction.md")
	writeTree(t, root, files)
	_, err := OpenHarbor(root)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "single: instruction.md is missing")
	assert.NotContains(t, err.Error(), "multi:")
}
