package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// Stored is what the run store holds of a run.
type Stored struct {
	Records []results.Record
	// Summary is the finished run's summary; nil while the run has none.
	Summary *Summary
	// Epochs are a training run's finished epochs.
	Epochs []int
	// LastEpoch is the last finished epoch's result, of a training run.
	LastEpoch *workflows.EpochResult
	// Modified is when the store last changed the run.
	Modified time.Time
}

// Load reads what the store holds of a run. A run the store does not know
// is ErrNotFound.
func Load(ctx context.Context, store results.Store, runID string) (Stored, error) {
	var s Stored
	recs, err := store.List(ctx, runID)
	if err != nil {
		return s, err
	}
	s.Records = recs
	switch sum, err := ReadSummary(ctx, store, runID); {
	case err == nil:
		s.Summary = &sum
	case !errors.Is(err, fs.ErrNotExist):
		return s, err
	}
	if s.Epochs, err = store.Epochs(ctx, runID); err != nil {
		return s, err
	}
	if n := len(s.Epochs); n > 0 {
		var last workflows.EpochResult
		if err := store.ReadEpoch(ctx, runID, s.Epochs[n-1], &last); err == nil {
			s.LastEpoch = &last
		}
	}
	st, err := store.Stat(ctx, runID)
	if err != nil {
		return s, err
	}
	if s.Summary == nil && len(recs) == 0 && len(s.Epochs) == 0 && !st.Exists {
		return s, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	s.Modified = st.Modified
	return s, nil
}

// IsTrain reports whether the run is a training run: it has epochs.
func (s Stored) IsTrain() bool {
	return len(s.Epochs) > 0 || s.Summary != nil && s.Summary.Train != nil && len(s.Summary.Train.Epochs) > 0
}

// Counts are the figures of a set of stored rollouts.
type Counts struct {
	Rollouts   int     `json:"rollouts"`
	OK         int     `json:"ok"`
	Failed     int     `json:"failed"`
	MeanReward float64 `json:"mean_reward"`
	// Refused counts the failed rollouts of tasks refused as configured
	// (rollout.KindConfig), which MeanReward leaves out.
	Refused int `json:"refused,omitempty"`
	// Epochs is the number of distinct epochs the rollouts belong to.
	Epochs int `json:"-"`
	// CostUSD is what the rollouts' model calls cost; UnpricedRollouts
	// counts those with a call of a model without a price, whose cost is
	// unknown and not in CostUSD.
	CostUSD          float64 `json:"cost_usd"`
	UnpricedRollouts int     `json:"unpriced_rollouts,omitempty"`
}

// Count counts rollouts: how many succeeded and failed, the mean reward of
// those scored (all but the refused) and what they cost.
func Count(recs []results.Record) Counts {
	var c Counts
	var sum float64
	epochs := map[int]bool{}
	for _, r := range recs {
		c.Rollouts++
		if r.Status == rollout.StatusOK {
			c.OK++
		} else {
			c.Failed++
		}
		if r.Status == rollout.StatusError && r.ErrorKind == rollout.KindConfig {
			c.Refused++
		}
		sum += r.Reward
		epochs[r.Epoch] = true
		c.CostUSD += r.CostUSD
		if r.UnpricedTurns > 0 {
			c.UnpricedRollouts++
		}
	}
	if c.Rollouts > c.Refused {
		c.MeanReward = sum / float64(c.Rollouts-c.Refused)
	}
	c.Epochs = len(epochs)
	return c
}

// Summary is a finished run's summary: an evaluation's result, a training
// run's or a sweep's, exactly one of them set. It decodes from any.
type Summary struct {
	Eval  *workflows.Result
	Train *workflows.TrainResult
	// Sweep is a sweep's result: its cells side by side.
	Sweep *workflows.SweepResult
}

// UnmarshalJSON decodes a sweep's result (it has cells), a training run's
// (it has epochs) or an evaluation's.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var probe struct {
		Epochs json.RawMessage `json:"epochs"`
		Cells  json.RawMessage `json:"cells"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("decode run summary: %w", err)
	}
	*s = Summary{}
	if probe.Cells != nil {
		s.Sweep = new(workflows.SweepResult)
		return decodeSummary(b, s.Sweep)
	}
	if probe.Epochs != nil {
		s.Train = new(workflows.TrainResult)
		return decodeSummary(b, s.Train)
	}
	s.Eval = new(workflows.Result)
	return decodeSummary(b, s.Eval)
}

// MarshalJSON encodes the result the summary holds.
func (s Summary) MarshalJSON() ([]byte, error) {
	if s.Train != nil {
		return json.Marshal(s.Train)
	}
	if s.Sweep != nil {
		return json.Marshal(s.Sweep)
	}
	return json.Marshal(s.Eval)
}

func decodeSummary(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode run summary: %w", err)
	}
	return nil
}

// ReadSummary reads a finished run's summary from the store.
func ReadSummary(ctx context.Context, store results.Store, runID string) (Summary, error) {
	var s Summary
	return s, store.ReadSummary(ctx, runID, &s)
}
