package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/trace"
)

// DefaultVerifierTimeout is a verifier's limit when neither its task nor
// the run sets one.
const DefaultVerifierTimeout = 10 * time.Minute

// TestsMetric is the metric a task's verifier's reward is stored under,
// beside the record's reward; the verifier's other named numbers are stored
// as "tests.<name>". A rubric combining the tests with other parts reads it
// by this name.
const TestsMetric = "tests"

// defaultVerifyGrace is how long past the workflow's wait for Verify to
// start a waiting workspace is kept: the workflow has given up on it by then.
const defaultVerifyGrace = time.Minute

// pendingVerify is a rollout whose agent is done and whose Verify has not
// started: what its Run saw.
type pendingVerify struct {
	job job
	out outcome
	// ws is the workspace, which the lease holds: set when Verify takes
	// what waits for it.
	ws    *harness.Workspace
	rerun bool // a stored failure, run again
	// expire closes the lease (the workspace, the capacity) when Verify
	// never comes.
	expire *time.Timer
}

// Verify runs the verifier of a rollout whose Run left its workspace here:
// it places the task's tests, runs the verifier with its timeout, reads the
// reward and named metrics, stores the rollout's record and trace (with the
// verifier's output tails), and removes the workspace. A verifier that
// crashed, hung or wrote no valid reward is a VerifierError, retried by the
// workflow like infrastructure, never a reward of 0; that attempt's trace
// is kept. A workspace that is not on this worker (it restarted) is
// SlotLost: the rollout runs again from the start.
func (a *Activities) Verify(ctx context.Context, in rollout.VerifyInput) (rollout.Summary, error) {
	key := in.Rollout.Key()
	l := a.lease(key)
	p := l.takePending()
	if p == nil {
		return rollout.Summary{}, temporal.NewNonRetryableApplicationError("the workspace of "+key+" is not on this worker", rollout.ErrTypeSlotLost, nil)
	}
	defer l.Close()
	j := p.job
	verifier, ok := a.Runtime.(harness.Verifier)
	if !ok {
		return rollout.Summary{}, configErr(fmt.Errorf("the harness runtime %T cannot run verifiers", a.Runtime))
	}
	timeout := j.verifierTimeout()
	stop := heartbeat(ctx, "verifier running")
	// A stopping worker lets the verifier go on for its drain timeout.
	vctx, endDrain := a.untilStopped(ctx, a.DrainTimeout)
	res, err := verifier.Verify(vctx, harness.VerifySpec{
		Key: key, Workspace: p.ws, Tests: j.task.Tests, Command: j.task.Verify,
		Env: j.task.VerifierEnv, Timeout: timeout,
	})
	stop()
	stopped := stoppedBy(vctx)
	endDrain()
	tr := j.trace(p.out)
	tr.EndedAt = time.Now().UTC()
	if err != nil {
		var ve *harness.VerifierError
		var cause error
		switch {
		case ctx.Err() != nil:
			return rollout.Summary{}, ctx.Err()
		case stopped:
			tr.Verifier = &trace.Verifier{Error: err.Error(), Timeout: timeout}
			cause = handedBack("the verifier")
		case errors.As(err, &ve):
			tr.Verifier = &trace.Verifier{ExitCode: ve.ExitCode, Error: ve.Reason, Stdout: ve.Stdout, Stderr: ve.Stderr, Duration: ve.Duration, Timeout: timeout}
			cause = temporal.NewApplicationError(fmt.Sprintf("task %s: the verifier %s", j.task.ID, ve.Reason), rollout.ErrTypeVerifier)
		default:
			tr.Verifier = &trace.Verifier{Error: err.Error(), Timeout: timeout}
			cause = runtimeErr("verifier runtime", err)
		}
		a.keepTrace(ctx, j, tr, cause)
		return rollout.Summary{}, cause
	}
	tr.Verifier = &trace.Verifier{
		ExitCode: res.ExitCode, Reward: res.Reward, Metrics: res.Metrics,
		Stdout: res.Stdout, Stderr: res.Stderr, Duration: res.Duration, Timeout: timeout,
	}
	rec, err := a.verdictRecord(ctx, j, p.out, p.ws, res, &tr)
	if err != nil {
		return rollout.Summary{}, err
	}
	return a.storeVerdict(ctx, j, rec, tr, p.rerun)
}

// verdictRecord is the record of a rollout whose verifier gave res: a
// rubric naming tests combines the verdict with its other parts
// (tests*0.8+judge*0.2), each a metric of its own; otherwise the verdict
// is the score. tr takes the score's detail.
func (a *Activities) verdictRecord(ctx context.Context, j job, out outcome, ws *harness.Workspace, res harness.VerifyResult, tr *trace.Rollout) (results.Record, error) {
	if j.rubric.UsesVerifier() {
		scored, str, err := a.score(ctx, j, out, rubrics.Input{
			Workspace: ws.Dir, Verdict: &rubrics.Verdict{Reward: res.Reward, Metrics: namedMetrics(res)},
		})
		if err != nil {
			if retryable(err) {
				a.keepScored(ctx, j, str, err)
			}
			return results.Record{}, err
		}
		tr.Judge, tr.Reward, tr.Score = str.Judge, str.Reward, str.Score
		return scored, nil
	}
	rec := record(j, out)
	rec.Reward, rec.Metrics = res.Reward, testsMetrics(res)
	tr.Reward, tr.Score = res.Reward, fmt.Sprintf("tests: %v", res.Reward)
	return rec, nil
}

// storeVerdict stores a verified rollout's record and trace and returns
// its summary; rerun says a stored failure was run again.
func (a *Activities) storeVerdict(ctx context.Context, j job, rec results.Record, tr trace.Rollout, rerun bool) (rollout.Summary, error) {
	rec.FinishedAt = tr.EndedAt
	stored, _, err := a.Store.Put(ctx, rec, &tr)
	if err != nil {
		return rollout.Summary{}, fmt.Errorf("write run store: %w", err)
	}
	a.Metrics.Cost(rec.Model, rec.CostUSD)
	s := summaryOf(stored)
	s.Rerun = rerun
	return a.withTokens(ctx, j.ref, s)
}

// testsMetrics are a verifier's reward as the "tests" metric and its other
// named numbers as "tests.<name>".
func testsMetrics(res harness.VerifyResult) map[string]float64 {
	m := make(map[string]float64, len(res.Metrics)+1)
	for k, v := range maps.All(namedMetrics(res)) {
		m[TestsMetric+"."+k] = v
	}
	m[TestsMetric] = res.Reward
	return m
}

// namedMetrics are a verifier's named numbers other than its reward, as a
// rubric's tests part takes them (and names them tests.<name> itself).
func namedMetrics(res harness.VerifyResult) map[string]float64 {
	m := make(map[string]float64, len(res.Metrics))
	for k, v := range maps.All(res.Metrics) {
		if k != "reward" {
			m[k] = v
		}
	}
	return m
}

// verifierTimeout is the run's verifier timeout when it sets one, else the
// task's, else DefaultVerifierTimeout.
func (j job) verifierTimeout() time.Duration {
	switch {
	case j.ref.Harness.VerifierTimeout > 0:
		return j.ref.Harness.VerifierTimeout
	case j.task.VerifierTimeout > 0:
		return j.task.VerifierTimeout
	}
	return DefaultVerifierTimeout
}
