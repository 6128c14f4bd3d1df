package activities

import (
	"context"
	"fmt"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/rubrics"
)

// ScoreGroup scores a task's group of rollouts together from their stored
// results, records the group in the run store and returns its summary.
func (a *Activities) ScoreGroup(ctx context.Context, in rollout.ScoreGroupInput) (rollout.GroupSummary, error) {
	rubric, err := rubrics.Compile(in.Rubric)
	if err != nil {
		return rollout.GroupSummary{}, configErr(err)
	}
	ts, err := a.Tasksets.Open(in.Taskset)
	if err != nil {
		return rollout.GroupSummary{}, openErr(err)
	}
	task, err := ts.Task(ctx, in.Index)
	if err != nil {
		return rollout.GroupSummary{}, taskErr(ctx, in.Taskset, in.Index, err)
	}
	rewards := make([]float64, len(in.Keys))
	for i, key := range in.Keys {
		rec, ok, err := a.Store.Get(ctx, in.RunID, key)
		if err != nil {
			return rollout.GroupSummary{}, fmt.Errorf("read run store: %w", err)
		}
		if ok && rec.Status == rollout.StatusOK {
			rewards[i] = rec.Reward
		}
	}
	g := rubric.ScoreGroup(task, rewards)
	stored, _, err := a.Store.PutGroup(ctx, in.RunID, results.Group{
		Key: results.GroupKey(in.RunID, in.Epoch, in.Index), Epoch: in.Epoch, Index: in.Index, TaskID: task.ID,
		Rollouts: in.Keys, Rewards: g.Rewards, Mean: g.Mean, Std: g.Std, Advantages: g.Advantages,
	})
	if err != nil {
		return rollout.GroupSummary{}, err
	}
	return rollout.GroupSummary{Key: stored.Key, Mean: stored.Mean, Std: stored.Std, Advantages: stored.Advantages}, nil
}

// FinishEpoch records a finished epoch; a resumed run skips epochs recorded here.
func (a *Activities) FinishEpoch(ctx context.Context, in rollout.FinishEpochInput) error {
	return a.Store.WriteEpoch(ctx, in.RunID, in.Epoch, in.Result)
}

// Inventory tells a (resumed) run which epochs its store has finished.
func (a *Activities) Inventory(ctx context.Context, in rollout.InventoryInput) (rollout.InventoryResult, error) {
	epochs, err := a.Store.Epochs(ctx, in.RunID)
	if err != nil {
		return rollout.InventoryResult{}, err
	}
	return rollout.InventoryResult{Epochs: epochs}, nil
}
