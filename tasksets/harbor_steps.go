package tasksets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// HarborSteps is the directory of a multi-step task's steps, one
// sub-directory per step, named as its [[steps]] entry.
const HarborSteps = "steps"

// Step reward strategies (task.toml's multi_step_reward_strategy).
const (
	// StepRewardMean is the mean over the steps that ran and count
	// (contributes_to_reward), each metric on its own: Harbor's default.
	StepRewardMean = "mean"
	// StepRewardFinal is the last counting step's verdict, as it is.
	StepRewardFinal = "final"
)

// Step is one step of a multi-step task (Harbor's [[steps]]): the agent
// is given its instruction in the sandbox the earlier steps left, then
// its tests score it. Steps run in order; a step whose reward falls
// below its MinReward ends the rollout there.
type Step struct {
	Name   string `json:"name"`
	Prompt string `json:"prompt"`
	// Tests is the step's own tests directory, placed over the task's
	// tests for its verifier (its files win); "" uses the task's alone.
	Tests string `json:"tests,omitempty"`
	// Solution is the step's reference solution directory, for the
	// oracle; "" when it has none.
	Solution string `json:"solution,omitempty"`
	// AgentTimeout and VerifierTimeout are [steps.agent] and
	// [steps.verifier] timeout_sec; 0 takes the task's.
	AgentTimeout    time.Duration `json:"agent_timeout,omitempty"`
	VerifierTimeout time.Duration `json:"verifier_timeout,omitempty"`
	// MinReward is min_reward: the least value of each named metric
	// ("reward" for a plain number) that lets the next step run.
	MinReward map[string]float64 `json:"min_reward,omitempty"`
	// Uncounted is contributes_to_reward = false: a gate whose verdict
	// can stop the rollout but does not enter its reward.
	Uncounted bool `json:"uncounted,omitempty"`
}

// Passes reports whether a step's verdict (its named metrics, "reward"
// among them) lets the next step run.
func (s Step) Passes(metrics map[string]float64) bool {
	for k, least := range s.MinReward {
		if metrics[k] < least {
			return false
		}
	}
	return true
}

// loadSteps reads a multi-step task's [[steps]] (doc's "steps", removed
// from it) and its steps/ directory into t, or adds what is wrong to
// problems. A task without [[steps]] is left as it is.
func loadSteps(doc map[string]any, dir string, t *Task) []string {
	raw, ok := doc["steps"]
	if !ok {
		return nil
	}
	delete(doc, "steps")
	t.StepReward = StepRewardMean
	if v, ok := doc["multi_step_reward_strategy"]; ok {
		s, _ := v.(string)
		if s != StepRewardMean && s != StepRewardFinal {
			return []string{`multi_step_reward_strategy must be "mean" or "final"`}
		}
		t.StepReward = s
		delete(doc, "multi_step_reward_strategy")
	}
	entries, ok := raw.([]any)
	if !ok || len(entries) == 0 {
		return []string{"[[steps]] must be a non-empty array of tables"}
	}
	var problems []string
	seen := map[string]bool{}
	for i, e := range entries {
		table, ok := e.(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("steps[%d] must be a table", i))
			continue
		}
		s, err := stepOf(table)
		if err != nil {
			problems = append(problems, fmt.Sprintf("steps[%d]: %v", i, err))
			continue
		}
		t.Warnings = append(t.Warnings, stepKeysNotCarriedOut(s.Name, table)...)
		if seen[s.Name] {
			problems = append(problems, fmt.Sprintf("steps[%d]: name %q is used twice", i, s.Name))
			continue
		}
		seen[s.Name] = true
		problems = append(problems, stepFiles(dir, &s)...)
		t.Steps = append(t.Steps, s)
	}
	if len(problems) == 0 && t.Tests == "" {
		for _, s := range t.Steps {
			if s.Tests == "" {
				problems = append(problems, fmt.Sprintf("step %s has no tests/%s and the task none to fall back on", s.Name, HarborTestScript))
			}
		}
	}
	return problems
}

// stepOf reads one [[steps]] table.
func stepOf(table map[string]any) (Step, error) {
	name, _ := table["name"].(string)
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return Step{}, errors.New("name must be the name of a directory under steps/")
	}
	s := Step{Name: name}
	var err error
	if s.AgentTimeout, err = timeoutSec(table, "agent"); err != nil {
		return Step{}, err
	}
	if s.VerifierTimeout, err = timeoutSec(table, "verifier"); err != nil {
		return Step{}, err
	}
	if v, ok := table["contributes_to_reward"]; ok {
		b, ok := v.(bool)
		if !ok {
			return Step{}, errors.New("contributes_to_reward must be true or false")
		}
		s.Uncounted = !b
	}
	if v, ok := table["min_reward"]; ok {
		if s.MinReward, err = minReward(v); err != nil {
			return Step{}, err
		}
	}
	return s, nil
}

// minReward reads min_reward: a number (the "reward" metric's least
// value) or a table of them by metric.
func minReward(v any) (map[string]float64, error) {
	if n, ok := number(v); ok {
		return map[string]float64{"reward": n}, nil
	}
	table, ok := v.(map[string]any)
	if !ok || len(table) == 0 {
		return nil, errors.New("min_reward must be a number or a table of numbers")
	}
	m := make(map[string]float64, len(table))
	for k, x := range table {
		n, ok := number(x)
		if !ok {
			return nil, fmt.Errorf("min_reward.%s must be a number", k)
		}
		m[k] = n
	}
	return m, nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// stepFiles reads steps/<name>/: instruction.md (required), tests/ and
// solution/ (optional).
func stepFiles(dir string, s *Step) []string {
	sd := filepath.Join(dir, HarborSteps, s.Name)
	where := HarborSteps + "/" + s.Name + "/"
	b, err := readSmall(filepath.Join(sd, HarborInstruction))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []string{where + HarborInstruction + " is missing"}
	case err != nil:
		return []string{where + HarborInstruction + ": " + err.Error()}
	case strings.TrimSpace(string(b)) == "":
		return []string{where + HarborInstruction + " is empty"}
	}
	s.Prompt = string(b)
	var problems []string
	for _, opt := range []struct {
		sub string
		dst *string
	}{{HarborTests, &s.Tests}, {HarborSolution, &s.Solution}} {
		fi, err := os.Stat(filepath.Join(sd, opt.sub))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			problems = append(problems, where+opt.sub+": "+fileProblem("", err).Error())
		case !fi.IsDir():
			problems = append(problems, where+opt.sub+" is "+DescribeMode(fi.Mode())+", not a directory")
		default:
			*opt.dst = filepath.Join(sd, opt.sub)
		}
	}
	return problems
}

// stepKeys are the keys of a [[steps]] table evalflow carries out.
var stepKeys = map[string]bool{"name": true, "agent": true, "verifier": true, "min_reward": true, "contributes_to_reward": true}

// stepKeysNotCarriedOut names, for the task's warnings, each key of a
// [[steps]] table evalflow does not carry out (a step's healthcheck, its
// artifacts, its own user or environment): the step runs without it,
// never passed over in silence.
func stepKeysNotCarriedOut(step string, table map[string]any) []string {
	var out []string
	for _, k := range sortedKeys(table) {
		if !stepKeys[k] {
			out = append(out, fmt.Sprintf("[[steps]] %s: %s is not carried out", step, k))
		}
	}
	for _, phase := range []string{"agent", "verifier"} {
		sub, _ := table[phase].(map[string]any)
		for _, k := range sortedKeys(sub) {
			if k != "timeout_sec" {
				out = append(out, fmt.Sprintf("[[steps]] %s: [steps.%s] %s is not carried out", step, phase, k))
			}
		}
	}
	return out
}

// sortedKeys are m's keys in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
