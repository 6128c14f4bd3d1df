package rollout

import "time"

// Activity names: workflows schedule activities by these names and the
// worker registers its methods under them, so they are part of the history
// format and never change.
const (
	ActivityDescribeTaskset = "DescribeTaskset"
	ActivityAcquire         = "Acquire"
	ActivityExpose          = "Expose"
	ActivityRun             = "Run"
	ActivityVerify          = "Verify"
	ActivityRelease         = "Release"
	ActivityFinish          = "Finish"
	ActivityScoreGroup      = "ScoreGroup"
	ActivityFinishEpoch     = "FinishEpoch"
	ActivityInventory       = "Inventory"
)

// Activity describes one activity of the contract: its name and the types
// of its input and result (nil Result: it returns only an error). The
// worker's methods are checked against this table.
type Activity struct {
	Name   string
	Input  any
	Result any
}

// Activities is every activity of the contract.
var Activities = []Activity{
	{ActivityDescribeTaskset, DescribeTasksetInput{}, DescribeTasksetResult{}},
	{ActivityAcquire, AcquireInput{}, AcquireResult{}},
	{ActivityExpose, ExposeInput{}, ExposeResult{}},
	{ActivityRun, RunInput{}, Summary{}},
	{ActivityVerify, VerifyInput{}, Summary{}},
	{ActivityRelease, ReleaseInput{}, nil},
	{ActivityFinish, FinishInput{}, nil},
	{ActivityScoreGroup, ScoreGroupInput{}, GroupSummary{}},
	{ActivityFinishEpoch, FinishEpochInput{}, nil},
	{ActivityInventory, InventoryInput{}, InventoryResult{}},
}

// DescribeTasksetInput asks for a taskset's size.
type DescribeTasksetInput struct {
	Taskset string `json:"taskset"`
}

// DescribeTasksetResult is a taskset's size; Len is -1 for an infinite one.
type DescribeTasksetResult struct {
	Len int64 `json:"len"`
}

// AcquireInput reserves a rollout slot on some worker.
type AcquireInput struct {
	Rollout Ref `json:"rollout"`
	// Hold, when set, makes Acquire hold the slot: it signals the workflow
	// (SignalSlot, a Slot carrying this token) where the slot is, then keeps
	// running, heartbeating, until the rollout's Run has started on that
	// worker or the slot is released. A worker that dies before Run starts
	// fails Acquire within its heartbeat timeout, so the workflow never
	// needs a schedule-to-start timeout on the worker's own queue: a slow
	// but live worker is waited for, never sent back for load.
	Hold string `json:"hold,omitempty"`
}

// SignalSlot is the signal a holding Acquire sends its workflow: a Slot.
const SignalSlot = "slot"

// Slot tells a workflow where a holding Acquire reserved a rollout's slot.
type Slot struct {
	// Token is the AcquireInput.Hold it answers.
	Token string `json:"token"`
	Key   string `json:"key"`
	// HostQueue is the task queue only the acquiring worker polls.
	HostQueue string `json:"host_queue"`
	Server    int    `json:"server"`
	// BaseURL is where the harness reaches the interception server when
	// nothing needs exposing (a local tunnel); empty: run Expose first.
	BaseURL string `json:"base_url,omitempty"`
}

// AcquireResult says where the rollout's later steps must run, or that the
// rollout is already in the run store (Done) and nothing needs to run.
type AcquireResult struct {
	Done *Summary `json:"done,omitempty"`
	// HostQueue is the task queue only the acquiring worker polls.
	HostQueue string `json:"host_queue"`
	// Server numbers the interception server within that worker's pool.
	Server int `json:"server"`
}

// ExposeInput asks for the slot's server to be reachable by the harness.
type ExposeInput struct {
	Key string `json:"key"`
}

// ExposeResult is where the harness reaches the interception server.
type ExposeResult struct {
	BaseURL string `json:"base_url"`
}

// RunInput runs the harness for an acquired, exposed slot, scores and stores it.
type RunInput struct {
	Rollout Ref    `json:"rollout"`
	BaseURL string `json:"base_url"`
	// VerifyWithin, when set, says the workflow runs Verify after Run for a
	// task with a verifier, on the same worker, starting within this long:
	// Run then keeps the workspace and the worker's capacity for it and
	// returns a Summary with Verify set instead of storing the rollout.
	// Unset (histories from before Verify), a verified task is scored by its
	// rubric as it was.
	VerifyWithin time.Duration `json:"verify_within,omitempty"`
}

// VerifyPlan is what Run tells the workflow about the Verify it must run.
type VerifyPlan struct {
	// Timeout is the verifier's own: the activity kills it then.
	Timeout time.Duration `json:"timeout"`
}

// VerifyInput runs the verifier of a rollout whose Run left its workspace
// on this worker, then stores the rollout with the verifier's reward.
type VerifyInput struct {
	Rollout Ref `json:"rollout"`
}

// ReleaseInput frees a slot whose rollout will not run.
type ReleaseInput struct {
	Key string `json:"key"`
}

// ScoreGroupInput scores the rollouts of one task together.
type ScoreGroupInput struct {
	RunID   string `json:"run_id"`
	Epoch   int    `json:"epoch"`
	Index   int64  `json:"index"`
	Taskset string `json:"taskset"`
	Rubric  string `json:"rubric"`
	// Keys are the group's rollout keys, by k.
	Keys []string `json:"keys"`
}

// GroupSummary is a scored group as the workflow keeps it.
type GroupSummary struct {
	Key        string    `json:"key"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	Advantages []float64 `json:"advantages"`
}

// FinishEpochInput records a finished epoch in the run store.
type FinishEpochInput struct {
	RunID  string `json:"run_id"`
	Epoch  int    `json:"epoch"`
	Result any    `json:"result"`
}

// InventoryInput asks what a run's store already holds.
type InventoryInput struct {
	RunID string `json:"run_id"`
}

// InventoryResult lists the epochs a run has finished, in order.
type InventoryResult struct {
	Epochs []int `json:"epochs"`
}

// FinishInput records a run's summary in the run store.
type FinishInput struct {
	RunID   string `json:"run_id"`
	Summary any    `json:"summary"`
}
