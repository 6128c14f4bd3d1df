// Package pull is the client a trainer uses to pull work from a training run
// instead of waiting for it: Sample advances the run's durable cursor and
// RunGroup runs a group of rollouts of a sampled task (RunRollout, one
// rollout); Progress tells how far the run is. SetPolicyVersion announces
// the trainer's weights version, and a group's MaxOffPolicySteps option
// reruns or marks rollouts generated too many versions ago. Several
// trainers may pull from one run at once; they get disjoint positions.
//
// A group's traces come from the run store, never from a worker's disk: give
// the client the store the workers write (WithTraces; a results.Store, files
// or PostgreSQL, through results.TraceJSON), and RunGroup returns every
// rollout's trace with the group.
package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
	"github.com/evalflow/evalflow/workflows"
)

// Client pulls from one run.
type Client struct {
	temporal client.Client
	runID    string
	traces   TraceReader
}

// TraceReader reads a rollout's trace from the run store: the trace of the
// attempt that made its record, as JSON (a trace.Rollout). results.TraceJSON
// adapts any results.Store.
type TraceReader interface {
	TraceJSON(ctx context.Context, runID, key string) (json.RawMessage, error)
}

// Option configures a Client.
type Option func(*Client)

// WithTraces has RunGroup read every rollout's trace through r.
func WithTraces(r TraceReader) Option {
	return func(c *Client) { c.traces = r }
}

// New returns a client of an existing pull run.
func New(c client.Client, runID string, opts ...Option) *Client {
	p := &Client{temporal: c, runID: runID}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Start starts a pull run on taskQueue and returns its client. Epochs 0
// hands out positions until the run is closed.
func Start(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, train workflows.TrainConfig, options ...Option) (*Client, error) {
	opts := client.StartWorkflowOptions{
		ID:                    cfg.RunID,
		TaskQueue:             taskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: workflows.SearchAttributes(cfg),
	}
	in := workflows.PullInput{Config: cfg, Train: train}
	_, err := c.ExecuteWorkflow(ctx, opts, workflows.PullName, in)
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) && strings.Contains(strings.ToLower(invalid.Error()), "search attribute") {
		// A namespace without evalflow's search attributes: run without them.
		opts.TypedSearchAttributes = temporal.SearchAttributes{}
		_, err = c.ExecuteWorkflow(ctx, opts, workflows.PullName, in)
	}
	if err != nil {
		return nil, fmt.Errorf("start pull run %s: %w", cfg.RunID, err)
	}
	return New(c, cfg.RunID, options...), nil
}

// Sample takes the run's next task position.
func (p *Client) Sample(ctx context.Context) (workflows.TaskRef, error) {
	var ref workflows.TaskRef
	err := p.update(ctx, workflows.UpdateSample, &ref)
	return ref, err
}

// Group is a group RunGroup ran: the rollouts' summaries and the group's
// scores, and with WithTraces every rollout's trace.
type Group struct {
	workflows.GroupResult
	// Traces are the rollouts' traces (each a trace.Rollout as JSON), by k
	// as Rollouts; nil without WithTraces, and nil for a rollout stored
	// without a trace.
	Traces []json.RawMessage `json:"traces,omitempty"`
	// Trajectories are the rollouts' trajectories, by k as Rollouts, when
	// the run traces tokens: verifiers-shaped steps (ids, masks, log
	// probabilities, policy versions) and whether each rollout extends its
	// prefix exactly (Interleavable); Samples makes them training samples.
	// A rollout whose token data was too large for its summary
	// (TokensCut) is read from its trace, with WithTraces; without it,
	// its trajectory has no steps.
	Trajectories []trajectory.Trajectory `json:"trajectories,omitempty"`
}

// Samples is the group's training samples, by k, as view makes them from
// its trajectories (trajectory.ViewInterleaved or ViewSteps).
func (g Group) Samples(view string) ([][]trajectory.Sample, error) {
	out := make([][]trajectory.Sample, len(g.Trajectories))
	for k, tr := range g.Trajectories {
		s, err := tr.Samples(view)
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

// GroupOption sets how RunGroup and RunRollout treat their rollouts.
type GroupOption func(*workflows.RunGroupInput)

// MaxOffPolicySteps bounds how many policy versions a rollout's oldest turn
// may be behind the run's current version (SetPolicyVersion) once the
// group's rollouts are done: a rollout past it runs again on the current
// version, or is returned marked stale (OnStale). Without it, no bound.
func MaxOffPolicySteps(n int64) GroupOption {
	return func(in *workflows.RunGroupInput) { in.MaxOffPolicySteps = &n }
}

// OnStale says what happens to a rollout past MaxOffPolicySteps:
// workflows.OnStaleRerun (the default) or workflows.OnStaleMark.
func OnStale(action string) GroupOption {
	return func(in *workflows.RunGroupInput) { in.OnStale = action }
}

// RunGroup runs n rollouts of the task at ref's position and returns their
// summaries, group scores and (WithTraces) traces, read from the run store
// whatever worker ran them. Only the position is sent: workers resolve the
// task from the taskset.
func (p *Client) RunGroup(ctx context.Context, ref workflows.TaskRef, n int, opts ...GroupOption) (Group, error) {
	var res Group
	in := workflows.RunGroupInput{Position: ref.Position, N: n}
	for _, o := range opts {
		o(&in)
	}
	err := p.update(ctx, workflows.UpdateRunGroup, &res.GroupResult, in)
	if err != nil {
		return res, err
	}
	if p.traces != nil {
		res.Traces = make([]json.RawMessage, len(res.Rollouts))
		for i, s := range res.Rollouts {
			if s.Trace == "" {
				continue
			}
			tr, err := p.traces.TraceJSON(ctx, p.runID, s.Key)
			if err != nil {
				return res, fmt.Errorf("read the trace of %s: %w", s.Key, err)
			}
			res.Traces[i] = tr
		}
	}
	res.Trajectories, err = trajectories(res)
	return res, err
}

// trajectories builds a group's trajectories from its summaries' token
// data, or from its traces for a rollout whose summary could not hold it;
// nil when no rollout has token data.
func trajectories(g Group) ([]trajectory.Trajectory, error) {
	var out []trajectory.Trajectory
	for i, s := range g.Rollouts {
		if len(s.Tokens) == 0 && !s.TokensCut {
			continue
		}
		if out == nil {
			out = make([]trajectory.Trajectory, len(g.Rollouts))
			for k := range out {
				out[k] = trajectory.Trajectory{Steps: []trajectory.Step{}, PrefixBreaks: []int{}}
			}
		}
		switch {
		case len(s.Tokens) > 0:
			tr, err := trajectory.FromSummary(s.Tokens)
			if err != nil {
				return nil, fmt.Errorf("trajectory of %s: %w", s.Key, err)
			}
			out[i] = tr
		case i < len(g.Traces) && g.Traces[i] != nil:
			var ro trace.Rollout
			if err := json.Unmarshal(g.Traces[i], &ro); err != nil {
				return nil, fmt.Errorf("trajectory of %s: read its trace: %w", s.Key, err)
			}
			out[i] = trajectory.FromTurns(ro.Turns)
		}
	}
	return out, nil
}

// Rollout is one rollout of a sampled task, with its trace (a
// trace.Rollout as JSON) when the client reads traces (WithTraces).
type Rollout struct {
	Ref     workflows.TaskRef `json:"ref"`
	Rollout rollout.Summary   `json:"rollout"`
	Trace   json.RawMessage   `json:"trace,omitempty"`
	// Trajectory is the rollout's, when the run traces tokens (see
	// Group.Trajectories).
	Trajectory *trajectory.Trajectory `json:"trajectory,omitempty"`
}

// RunRollout runs one rollout of the task at ref's position: a group of
// one, so it is counted, stored and keyed like any group (k = 0).
func (p *Client) RunRollout(ctx context.Context, ref workflows.TaskRef, opts ...GroupOption) (Rollout, error) {
	res, err := p.RunGroup(ctx, ref, 1, opts...)
	if err != nil {
		return Rollout{}, err
	}
	if len(res.Rollouts) != 1 {
		return Rollout{}, fmt.Errorf("run_rollout on run %s: %d rollouts came back, want 1", p.runID, len(res.Rollouts))
	}
	out := Rollout{Ref: res.Ref, Rollout: res.Rollouts[0]}
	if len(res.Traces) == 1 {
		out.Trace = res.Traces[0]
	}
	if len(res.Trajectories) == 1 {
		out.Trajectory = &res.Trajectories[0]
	}
	return out, nil
}

// Progress reports how far the run is: positions sampled, groups run and
// running, and the task count of an epoch.
func (p *Client) Progress(ctx context.Context) (workflows.PullProgress, error) {
	var pr workflows.PullProgress
	v, err := p.temporal.QueryWorkflow(ctx, p.runID, "", workflows.QueryProgress)
	if err != nil {
		return pr, fmt.Errorf("progress of run %s: %w", p.runID, err)
	}
	if err := v.Get(&pr); err != nil {
		return pr, fmt.Errorf("progress of run %s: %w", p.runID, err)
	}
	return pr, nil
}

// SetPolicyVersion announces the trainer's current policy (weights)
// version, and returns the version now current. Rollouts scheduled from
// then on, also those of running groups still waiting for a place, are
// generated on it and their turns record it (unless the upstream names its
// own, --policy-version-header). Versions only go forward: an older one is
// refused; announcing the current one again changes nothing.
func (p *Client) SetPolicyVersion(ctx context.Context, version int64) (int64, error) {
	var res workflows.PolicyResult
	err := p.update(ctx, workflows.UpdatePolicy, &res, workflows.PolicyInput{Version: version})
	return res.Version, err
}

// Close ends the run once its running groups finish.
func (p *Client) Close(ctx context.Context) error {
	return p.update(ctx, workflows.UpdateClose, nil)
}

func (p *Client) update(ctx context.Context, name string, out any, args ...any) error {
	h, err := p.temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   p.runID,
		UpdateName:   name,
		Args:         args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("%s on run %s: %w", name, p.runID, err)
	}
	if err := h.Get(ctx, out); err != nil {
		return fmt.Errorf("%s on run %s: %w", name, p.runID, err)
	}
	return nil
}
