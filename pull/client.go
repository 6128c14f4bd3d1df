// Package pull is the client a trainer uses to pull work from a training run
// instead of waiting for it: Sample advances the run's durable cursor and
// RunGroup runs a group of rollouts of a sampled task (RunRollout, one
// rollout); Progress tells how far the run is. Several trainers may
// pull from one run at once; they get disjoint positions.
package pull

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// Client pulls from one run.
type Client struct {
	temporal client.Client
	runID    string
}

// New returns a client of an existing pull run.
func New(c client.Client, runID string) *Client {
	return &Client{temporal: c, runID: runID}
}

// Start starts a pull run on taskQueue and returns its client. Epochs 0
// hands out positions until the run is closed.
func Start(ctx context.Context, c client.Client, taskQueue string, cfg workflows.RunConfig, train workflows.TrainConfig) (*Client, error) {
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
	return New(c, cfg.RunID), nil
}

// Sample takes the run's next task position.
func (p *Client) Sample(ctx context.Context) (workflows.TaskRef, error) {
	var ref workflows.TaskRef
	err := p.update(ctx, workflows.UpdateSample, &ref)
	return ref, err
}

// RunGroup runs n rollouts of the task at ref's position and returns their
// summaries (with trace files) and group scores. Only the position is sent:
// workers resolve the task from the taskset.
func (p *Client) RunGroup(ctx context.Context, ref workflows.TaskRef, n int) (workflows.GroupResult, error) {
	var res workflows.GroupResult
	err := p.update(ctx, workflows.UpdateRunGroup, &res, workflows.RunGroupInput{Position: ref.Position, N: n})
	return res, err
}

// Rollout is one rollout of a sampled task.
type Rollout struct {
	Ref     workflows.TaskRef `json:"ref"`
	Rollout rollout.Summary   `json:"rollout"`
}

// RunRollout runs one rollout of the task at ref's position: a group of
// one, so it is counted, stored and keyed like any group (k = 0).
func (p *Client) RunRollout(ctx context.Context, ref workflows.TaskRef) (Rollout, error) {
	res, err := p.RunGroup(ctx, ref, 1)
	if err != nil {
		return Rollout{}, err
	}
	if len(res.Rollouts) != 1 {
		return Rollout{}, fmt.Errorf("run_rollout on run %s: %d rollouts came back, want 1", p.runID, len(res.Rollouts))
	}
	return Rollout{Ref: res.Ref, Rollout: res.Rollouts[0]}, nil
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
