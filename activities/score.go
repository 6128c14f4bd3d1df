package activities

import (
	"context"
	"errors"
	"os"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/trace"
)

// score scores a finished rollout with the run's rubric and builds its
// record and trace. in carries what the rollout's earlier steps found for
// the rubric: the workspace and the verifier's verdict (a tests part's
// reward and metrics); score fills in the task, the answer, the transcript
// and the judge. A rollout the agent failed (classify) is not scored.
//
// The error is the rubric's, with the trace so far: a ConfigError (a judge
// part on a worker without a provider, a tests part for a task without a
// verifier) fails the run; any other (a command that fails, a judge without
// a score) is an ErrTypeRubric, retried, never a reward of 0.
func (a *Activities) score(ctx context.Context, j job, out outcome, in rubrics.Input) (results.Record, *trace.Rollout, error) {
	answer := out.res.Answer
	if answer == "" && len(out.turns) > 0 {
		answer = out.turns[len(out.turns)-1].Response.Message.Text()
	}
	ref := j.ref
	rec := record(j, out)
	tr := j.trace(out)
	if kind, msg := classify(out.res, out.turns, ref.Harness.MaxTurns); kind != "" {
		rec.Status, rec.ErrorKind, rec.Error = rollout.StatusError, kind, msg
		return rec, &tr, nil
	}

	in.Task, in.Answer, in.Transcript, in.State = j.task, answer, transcript(out.turns), out.side.State
	if in.Env == nil {
		in.Env = withoutCredentials(os.Environ())
	}
	var jd *judge
	route, err := a.route(rollout.RoleJudge, ref.Harness.Roles.Judge)
	if err != nil {
		return rec, &tr, err
	}
	if a.Judge != nil || route != nil {
		jd = &judge{provider: a.Judge, route: route, model: ref.Model, prices: a.prices()}
		in.Judge = jd
	}
	stop := heartbeat(ctx, "scoring")
	sc, err := j.rubric.Score(ctx, in)
	stop()
	tr.Judge = jd.calls()
	// The judge's calls are the rollout's spend too.
	usd, unpriced := trace.Cost(tr.Judge)
	rec.CostUSD += usd
	rec.UnpricedTurns += unpriced
	if err != nil {
		var cfg *rubrics.ConfigError
		if errors.As(err, &cfg) {
			return rec, &tr, configErr(err)
		}
		if ctx.Err() != nil {
			return rec, &tr, ctx.Err()
		}
		return rec, &tr, temporal.NewApplicationErrorWithCause(err.Error(), rollout.ErrTypeRubric, err)
	}
	rec.Reward, rec.Metrics = sc.Reward, sc.Metrics
	tr.Reward, tr.Score = sc.Reward, sc.Detail
	return rec, &tr, nil
}

// keepScored stores the trace of an attempt whose rubric failed, judge
// calls included, as keepAttempt does for the harness's failures.
func (a *Activities) keepScored(ctx context.Context, j job, tr *trace.Rollout, cause error) {
	at := results.Attempt{N: j.ref.Attempt, Error: shortErr(errorText(cause)), Rollout: *tr}
	if _, err := a.Store.PutAttempt(ctx, j.ref.RunID, at); err != nil {
		a.logger().Warn("could not keep the trace of a failed attempt", "key", j.key, "attempt", j.ref.Attempt, "error", err)
	}
}

// withoutCredentials is env without the variables named like credentials
// (harness.IsSecretName): a rubric's command is a program of the run's
// author, and what it prints may reach an error in a workflow history.
func withoutCredentials(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name != "" && !harness.IsSecretName(name) {
			out = append(out, kv)
		}
	}
	return out
}

// transcript is the conversation of a rollout as a judge is shown it: the
// messages of its last model call, then that call's answer.
func transcript(turns []trace.Turn) []rubrics.Message {
	if len(turns) == 0 {
		return nil
	}
	last := turns[len(turns)-1]
	msgs := make([]rubrics.Message, 0, len(last.Request.Messages)+1)
	for _, m := range last.Request.Messages {
		msgs = append(msgs, rubrics.Message{Role: m.Role, Text: messageText(m)})
	}
	if m := last.Response.Message; m.Role != "" {
		msgs = append(msgs, rubrics.Message{Role: m.Role, Text: messageText(m)})
	}
	return msgs
}

// messageText is a message's text with its tool calls written out.
func messageText(m dialects.Message) string {
	var b strings.Builder
	b.WriteString(m.Text())
	for _, c := range m.ToolCalls {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("[tool call " + c.Name + " " + c.Arguments + "]")
	}
	return b.String()
}

// record is a finished rollout's record before it is scored: who answered,
// in how many turns and tokens, how long it took.
func record(j job, out outcome) results.Record {
	ref := j.ref
	rec := results.Record{
		Key: j.key, RunID: ref.RunID, Epoch: ref.Epoch, Index: ref.Index, K: ref.K, TaskID: j.task.ID,
		Status: rollout.StatusOK, Turns: len(out.turns), Model: answeredBy(out.turns, ref.Model),
		DurationMS: out.res.Duration.Milliseconds(), Attempt: ref.Attempt, FinishedAt: out.stopped.UTC(),
	}
	for _, t := range out.turns {
		rec.InputTokens += t.Response.Usage.InputTokens
		rec.OutputTokens += t.Response.Usage.OutputTokens
	}
	rec.CostUSD, rec.UnpricedTurns = trace.Cost(out.turns)
	// So are the simulated user's, which no limit of the agent's counts.
	usd, unpriced := trace.Cost(userCalls(out.side.Users))
	rec.CostUSD += usd
	rec.UnpricedTurns += unpriced
	return rec
}

// userCalls are the model calls of a persona user's turns.
func userCalls(users []trace.UserTurn) []trace.Turn {
	var calls []trace.Turn
	for _, u := range users {
		if u.Call != nil {
			calls = append(calls, *u.Call)
		}
	}
	return calls
}
