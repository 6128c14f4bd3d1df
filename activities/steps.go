package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/trace"
)

// runSteps runs a multi-step task in the one workspace its Run prepared:
// each step's agent is given that step's instruction, then the step's
// tests (over the task's) score it, and a step whose verdict falls below
// its min_reward ends the rollout. The steps' verdicts make the rollout's
// reward as the task says (mean or final), and the record holds each
// step's as step.<name>.
//
// The whole rollout is one attempt: a worker lost between steps loses the
// sandbox, and the rollout runs again from its first step elsewhere. The
// agents and verifiers of all steps run within the run's harness timeout.
// An agent that fails (exits non-zero, times out) ends the rollout as its
// failure, as in a task of one step; a verifier that gives no reward is
// the infrastructure's, retried.
func (a *Activities) runSteps(ctx context.Context, j job, reg *interception.Registration, baseURL string, ws *harness.Workspace, rerun bool) (rollout.Summary, error) {
	verifier, ok := a.Runtime.(harness.Verifier)
	if !ok {
		return rollout.Summary{}, configErr(fmt.Errorf("the harness runtime %T cannot run verifiers", a.Runtime))
	}
	deadline := time.Now().Add(j.ref.Harness.Timeout)
	var steps []trace.Step
	var out outcome
	started := time.Now()
	for k, step := range j.task.Steps {
		sj := j.forStep(step, time.Until(deadline))
		out = a.runHarness(ctx, sj, reg, baseURL, ws, true)
		out.started = started
		if err := infraError(ctx, sj, out); err != nil {
			return a.stepsFailed(ctx, j, out, steps, err)
		}
		if kind, _ := classify(out.res, out.turns, j.ref.Harness.MaxTurns); kind != "" {
			break // the agent's failure: scored as such below
		}
		st, err := a.verifyStep(ctx, verifier, sj, step, ws, time.Until(deadline))
		st.Turns = len(out.turns)
		steps = append(steps, st)
		if err != nil {
			return a.stepsFailed(ctx, j, out, steps, err)
		}
		if !step.Passes(st.Verifier.Metrics) && k < len(j.task.Steps)-1 {
			steps[len(steps)-1].Stopped = true
			break
		}
	}
	out.turns, _ = reg.Finish()
	out.stopped = time.Now()
	tr := j.trace(out)
	tr.Steps = steps
	if kind, _ := classify(out.res, out.turns, j.ref.Harness.MaxTurns); kind != "" || len(steps) == 0 {
		rec, str, err := a.score(ctx, j, out, rubrics.Input{})
		if err != nil {
			return rollout.Summary{}, err
		}
		str.Steps = steps
		return a.storeVerdict(ctx, j, rec, *str, rerun)
	}
	last := steps[len(steps)-1].Verifier
	tr.Verifier = &last
	res := stepsVerdict(j.task.StepReward, steps)
	rec, err := a.verdictRecord(ctx, j, out, ws, res, &tr)
	if err != nil {
		return rollout.Summary{}, err
	}
	if rec.Metrics == nil {
		rec.Metrics = map[string]float64{}
	}
	for _, s := range steps {
		rec.Metrics["step."+s.Name] = s.Verifier.Reward
	}
	return a.storeVerdict(ctx, j, rec, tr, rerun)
}

// stepsFailed keeps the trace of a multi-step attempt that ended in an
// error of the infrastructure and returns that error.
func (a *Activities) stepsFailed(ctx context.Context, j job, out outcome, steps []trace.Step, cause error) (rollout.Summary, error) {
	if retryable(cause) {
		tr := j.trace(out)
		tr.Steps = steps
		a.keepTrace(ctx, j, tr, cause)
	}
	return rollout.Summary{}, cause
}

// forStep is the job of one step: its instruction is the task's prompt,
// its agent timeout the step's (else the task's), within what is left of
// the rollout's time, and the oracle runs the step's solution (else the
// task's).
func (j job) forStep(step tasksets.Step, left time.Duration) job {
	sj := j
	sj.task.Prompt = step.Prompt
	if step.AgentTimeout > 0 {
		sj.task.AgentTimeout = step.AgentTimeout
	}
	t := min(j.ref.Harness.AgentTimeout(sj.task.AgentTimeout), max(left, time.Second))
	sj.ref.Harness.Timeout, sj.ref.Harness.TimeoutGiven = t, true
	if j.ref.Harness.Oracle && step.Solution != "" {
		sj.solution = step.Solution
	}
	return sj
}

// verifyStep runs one step's verifier: the task's tests with the step's
// over them at /tests, under the step's timeout (else the run's or the
// task's), within what is left of the rollout's time.
func (a *Activities) verifyStep(ctx context.Context, v harness.Verifier, j job, step tasksets.Step, ws *harness.Workspace, left time.Duration) (trace.Step, error) {
	st := trace.Step{Name: step.Name, Uncounted: step.Uncounted}
	timeout := j.verifierTimeout()
	if step.VerifierTimeout > 0 && j.ref.Harness.VerifierTimeout == 0 {
		timeout = step.VerifierTimeout
	}
	timeout = min(timeout, max(left, time.Second))
	tests, cleanup, err := a.stepTests(j.task.Tests, step.Tests)
	if err != nil {
		return st, temporal.NewApplicationErrorWithCause("step tests", rollout.ErrTypeRuntime, err)
	}
	defer cleanup()
	stop := heartbeat(ctx, "verifier of step "+step.Name+" running")
	res, err := v.Verify(ctx, harness.VerifySpec{
		Key: j.key, Workspace: ws, Tests: tests, Command: j.task.Verify,
		Env: j.task.VerifierEnv, Timeout: timeout,
	})
	stop()
	var ve *harness.VerifierError
	switch {
	case err == nil:
		st.Verifier = trace.Verifier{ExitCode: res.ExitCode, Reward: res.Reward, Metrics: res.Metrics,
			Stdout: res.Stdout, Stderr: res.Stderr, Duration: res.Duration, Timeout: timeout}
		return st, nil
	case ctx.Err() != nil:
		return st, ctx.Err()
	case errors.As(err, &ve):
		st.Verifier = trace.Verifier{ExitCode: ve.ExitCode, Error: ve.Reason, Stdout: ve.Stdout, Stderr: ve.Stderr, Duration: ve.Duration, Timeout: timeout}
		return st, temporal.NewApplicationError(fmt.Sprintf("task %s: the verifier of step %s %s", j.task.ID, step.Name, ve.Reason), rollout.ErrTypeVerifier)
	}
	st.Verifier = trace.Verifier{Error: err.Error(), Timeout: timeout}
	return st, runtimeErr("verifier runtime", err)
}

// stepTests is the directory a step's verifier sees at /tests: the
// task's tests with the step's copied over them (the step's files win),
// or whichever of the two there is.
func (a *Activities) stepTests(task, step string) (dir string, cleanup func(), err error) {
	switch {
	case step == "":
		return task, func() {}, nil
	case task == "":
		return step, func() {}, nil
	}
	dir, err = os.MkdirTemp(a.WorkDir, "step-tests-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	for _, src := range []string{task, step} {
		if err := overlay(dir, src); err != nil {
			cleanup()
			return "", nil, err
		}
	}
	return dir, cleanup, nil
}

// overlay copies the directories and regular files of src into dst, over
// those of the same name; links and other files are left out, as the
// tests' own mount would never follow them out of the task.
func overlay(dst, src string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, fi.Mode().Perm())
	})
}

// stepsVerdict makes the rollout's verdict from its steps' as Harbor
// does: "mean" averages each metric over the counted steps that ran (a
// metric a step did not write counts 0 for it), "final" takes the last
// counted step's as it is.
func stepsVerdict(strategy string, steps []trace.Step) harness.VerifyResult {
	var counted []trace.Step
	for _, s := range steps {
		if !s.Uncounted {
			counted = append(counted, s)
		}
	}
	if len(counted) == 0 {
		return harness.VerifyResult{Metrics: map[string]float64{"reward": 0}}
	}
	if strategy == tasksets.StepRewardFinal {
		v := counted[len(counted)-1].Verifier
		return harness.VerifyResult{Reward: v.Reward, Metrics: v.Metrics}
	}
	var names []string
	for _, s := range counted {
		for k := range s.Verifier.Metrics {
			if !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	res := harness.VerifyResult{Metrics: map[string]float64{}}
	for _, k := range names {
		var sum float64
		for _, s := range counted {
			sum += s.Verifier.Metrics[k]
		}
		res.Metrics[k] = sum / float64(len(counted))
	}
	var sum float64
	for _, s := range counted {
		sum += s.Verifier.Reward
	}
	res.Reward = sum / float64(len(counted))
	return res
}
