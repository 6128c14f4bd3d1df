package workflows

import (
	"math"
	"sort"
	"time"

	"github.com/evalflow/evalflow/rollout"
)

// Aggregates are a run's running totals. They travel through continue-as-new,
// so they hold sums, never per-rollout lists.
type Aggregates struct {
	Rollouts int64 `json:"rollouts"`
	OK       int64 `json:"ok"`
	Failed   int64 `json:"failed"`
	Reused   int64 `json:"reused"`
	Rerun    int64 `json:"rerun,omitempty"`
	// Refused counts rollouts of tasks that cannot run as configured
	// (rollout.KindConfig): failed, and left out of the mean, its spread
	// and pass@k, which are the scored rollouts' only.
	Refused      int64   `json:"refused,omitempty"`
	RewardSum    float64 `json:"reward_sum"`
	RewardSumSq  float64 `json:"reward_sum_sq"`
	Turns        int64   `json:"turns"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	DurationMS   int64   `json:"duration_ms"`
	MaxMS        int64   `json:"max_ms"`
	// CostUSD sums the rollouts' cost; UnpricedRollouts counts rollouts
	// with a call whose model had no price, whose cost is not all in it.
	CostUSD          float64 `json:"cost_usd,omitempty"`
	UnpricedRollouts int64   `json:"unpriced_rollouts,omitempty"`
	// Errors counts failed rollouts by kind, sorted by kind.
	Errors []KindCount `json:"errors,omitempty"`
	// TasksDone counts tasks whose every rollout has finished, but
	// those with a refused rollout: the tasks pass@k is over.
	TasksDone int64 `json:"tasks_done"`
	// PassAtKSum[j] sums pass@(j+1) over finished tasks.
	PassAtKSum []float64 `json:"pass_at_k_sum,omitempty"`
	// FailedSamples keeps the first failures, to show what went wrong.
	FailedSamples []FailedRollout `json:"failed_samples,omitempty"`
}

// FailedRollout is one failed rollout, as an example of its kind.
type FailedRollout struct {
	Key   string `json:"key"`
	Kind  string `json:"kind"`
	Error string `json:"error,omitempty"`
}

// maxFailedSamples bounds Aggregates.FailedSamples.
const maxFailedSamples = 10

// KindCount is how many rollouts failed with one error kind.
type KindCount struct {
	Kind  string `json:"kind"`
	Count int64  `json:"count"`
}

// TaskTally follows a task whose rollouts are not all finished yet.
type TaskTally struct {
	Position int64 `json:"position"`
	Done     int   `json:"done"`
	Passed   int   `json:"passed"`
	Refused  int   `json:"refused,omitempty"`
}

func (a *Aggregates) add(s rollout.Summary) {
	a.Rollouts++
	if refused(s) {
		a.Refused++
	}
	if s.Status == rollout.StatusOK {
		a.OK++
	} else {
		a.Failed++
		a.addError(s.ErrorKind)
		if len(a.FailedSamples) < maxFailedSamples {
			a.FailedSamples = append(a.FailedSamples, FailedRollout{Key: s.Key, Kind: s.ErrorKind, Error: s.Error})
		}
	}
	if s.Reused {
		a.Reused++
	}
	if s.Rerun {
		a.Rerun++
	}
	a.RewardSum += s.Reward
	a.RewardSumSq += s.Reward * s.Reward
	a.Turns += int64(s.Turns)
	a.InputTokens += int64(s.InputTokens)
	a.OutputTokens += int64(s.OutputTokens)
	a.DurationMS += s.DurationMS
	a.MaxMS = max(a.MaxMS, s.DurationMS)
	a.addCost(s)
}

// addCost adds a rollout's cost to the totals.
func (a *Aggregates) addCost(s rollout.Summary) {
	a.CostUSD += s.CostUSD
	if s.UnpricedTurns > 0 {
		a.UnpricedRollouts++
	}
}

// SumCost is the cost of rollouts: what they cost, and how many of them
// had a call of a model without a price (their cost is partly unknown).
// A run's total is the same sum (Aggregates.CostUSD).
func SumCost(rollouts []rollout.Summary) (usd float64, unpriced int64) {
	var a Aggregates
	for _, s := range rollouts {
		a.addCost(s)
	}
	return a.CostUSD, a.UnpricedRollouts
}

func (a *Aggregates) addError(kind string) {
	if kind == "" {
		kind = "unknown"
	}
	i := sort.Search(len(a.Errors), func(i int) bool { return a.Errors[i].Kind >= kind })
	if i < len(a.Errors) && a.Errors[i].Kind == kind {
		a.Errors[i].Count++
		return
	}
	a.Errors = append(a.Errors, KindCount{})
	copy(a.Errors[i+1:], a.Errors[i:])
	a.Errors[i] = KindCount{Kind: kind, Count: 1}
}

// refused reports whether s is a rollout of a task refused as configured.
func refused(s rollout.Summary) bool {
	return s.Status == rollout.StatusError && s.ErrorKind == rollout.KindConfig
}

// finishTask adds a task's pass@k for k = 1..n, given c of n rollouts
// passed; a task with a refused rollout has none.
func (a *Aggregates) finishTask(n, c int, refused bool) {
	if refused {
		return
	}
	if len(a.PassAtKSum) < n {
		a.PassAtKSum = append(a.PassAtKSum, make([]float64, n-len(a.PassAtKSum))...)
	}
	for k := 1; k <= n; k++ {
		a.PassAtKSum[k-1] += PassAtK(n, c, k)
	}
	a.TasksDone++
}

// PassAtK is the unbiased estimator 1 - C(n-c, k)/C(n, k) of the chance that
// at least one of k samples passes, given c of n samples passed.
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// Scored counts the rollouts a mean is over: all but the refused.
func (a Aggregates) Scored() int64 { return a.Rollouts - a.Refused }

// Mean reward over the scored rollouts; 0 when none is.
func (a Aggregates) Mean() float64 {
	if a.Scored() <= 0 {
		return 0
	}
	return a.RewardSum / float64(a.Scored())
}

// Std is the population standard deviation of the scored rollouts' rewards.
func (a Aggregates) Std() float64 {
	if a.Scored() <= 0 {
		return 0
	}
	m := a.Mean()
	v := a.RewardSumSq/float64(a.Scored()) - m*m
	return math.Sqrt(max(v, 0))
}

// PassAt is one pass@k figure.
type PassAt struct {
	K     int     `json:"k"`
	Value float64 `json:"value"`
}

// Progress is what the progress query returns.
type Progress struct {
	RunID      string    `json:"run_id"`
	Tasks      int64     `json:"tasks"`
	Rollouts   int64     `json:"rollouts"`
	Done       int64     `json:"done"`
	Failed     int64     `json:"failed"`
	Running    int       `json:"running"`
	Reused     int64     `json:"reused"`
	MeanReward float64   `json:"mean_reward"`
	StartedAt  time.Time `json:"started_at"`
	// Segment counts continue-as-new segments of this run, from 0.
	Segment int `json:"segment"`
}

// Result is a finished run's summary.
type Result struct {
	RunID    string `json:"run_id"`
	Taskset  string `json:"taskset"`
	Model    string `json:"model"`
	Tasks    int64  `json:"tasks"`
	Rollouts int64  `json:"rollouts"`
	OK       int64  `json:"ok"`
	Failed   int64  `json:"failed"`
	// Reused counts rollouts the run store already held (a rerun run id);
	// Rerun counts stored failures that ran again (RunConfig.RetryFailed).
	Reused int64 `json:"reused"`
	Rerun  int64 `json:"rerun,omitempty"`
	// Refused counts the failed rollouts of tasks that cannot run as
	// configured (rollout.KindConfig); MeanReward, StdReward and PassAtK
	// are over the others, none when Refused is all of Rollouts.
	Refused    int64       `json:"refused,omitempty"`
	MeanReward float64     `json:"mean_reward"`
	StdReward  float64     `json:"std_reward"`
	PassAtK    []PassAt    `json:"pass_at_k,omitempty"`
	Errors     []KindCount `json:"errors,omitempty"`
	// FailedSamples are the first failed rollouts, with their errors.
	FailedSamples []FailedRollout `json:"failed_samples,omitempty"`
	Turns         int64           `json:"turns"`
	InputTokens   int64           `json:"input_tokens"`
	OutputTokens  int64           `json:"output_tokens"`
	// MeanRolloutMS and MaxRolloutMS time rollouts, harness start to end.
	MeanRolloutMS int64 `json:"mean_rollout_ms"`
	MaxRolloutMS  int64 `json:"max_rollout_ms"`
	// CostUSD is what the run's rollouts cost at the workers' prices;
	// UnpricedRollouts counts rollouts with a call of a model without a
	// price, whose cost is unknown and not in CostUSD.
	CostUSD          float64 `json:"cost_usd"`
	UnpricedRollouts int64   `json:"unpriced_rollouts,omitempty"`
	// Stopped says why the run ended before all its rollouts ran
	// (StoppedMaxRunCost); empty when it ran them all.
	Stopped   string    `json:"stopped,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	WallTime  string    `json:"wall_time"`
	Segments  int       `json:"segments"`
}

func (a Aggregates) result(cfg RunConfig, tasks int64, started, ended time.Time, segments int) Result {
	r := Result{
		RunID: cfg.RunID, Taskset: cfg.Taskset, Model: cfg.Model, Tasks: tasks,
		Rollouts: a.Rollouts, OK: a.OK, Failed: a.Failed, Reused: a.Reused, Rerun: a.Rerun, Refused: a.Refused,
		MeanReward: a.Mean(), StdReward: a.Std(), Errors: a.Errors, FailedSamples: a.FailedSamples,
		Turns: a.Turns, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
		MaxRolloutMS: a.MaxMS, CostUSD: a.CostUSD, UnpricedRollouts: a.UnpricedRollouts, StartedAt: started, EndedAt: ended,
		WallTime: ended.Sub(started).Round(time.Millisecond).String(), Segments: segments,
	}
	if a.Rollouts > 0 {
		r.MeanRolloutMS = a.DurationMS / a.Rollouts
	}
	for j, s := range a.PassAtKSum {
		if a.TasksDone > 0 {
			r.PassAtK = append(r.PassAtK, PassAt{K: j + 1, Value: s / float64(a.TasksDone)})
		}
	}
	return r
}
