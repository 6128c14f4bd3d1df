// Package activities holds evalflow's Temporal activities: methods on structs
// that own their dependencies (interception pool, harness runtime, run store).
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/metrics"
	"github.com/evalflow/evalflow/internal/prices"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/tasksets"
)

// Activities runs rollout steps on one worker. Acquire runs on the shared
// task queue; Expose, Run, Verify and Release run on HostQueue, which only
// this worker polls, because they need the slot (or the workspace) this
// worker holds.
type Activities struct {
	Pool     *interception.Pool
	Runtime  harness.Runtime
	Store    results.Store
	Tasksets *TasksetCache
	// HostQueue is this worker's own task queue.
	HostQueue string
	// DefaultHarness is the command run when a run names none (the built-in agent).
	DefaultHarness []string
	// Capacity bounds the rollouts this worker holds at once, from Acquire to
	// the end of Run, or of Verify for a task with a verifier.
	Capacity *Capacity
	// Judge is the model provider judge rubrics ask; nil fails a run whose
	// rubric has a judge part.
	Judge Provider
	// Providers are the worker's named providers (--provider), the default
	// one among them, that a run's roles pick by name (roles.go).
	Providers map[string]Provider
	// Prices price the judge's calls, as the interception servers price
	// the harness's and the simulated user's (the same table);
	// prices.Default() when nil.
	Prices prices.Table
	// WorkDir is the parent of task workspaces; "" is the system temp dir.
	WorkDir string
	// SkipUnsupported lets a runtime that builds no image (local, netns,
	// bwrap) run a task whose Dockerfile asks for what it cannot carry out
	// (RUN lines, earlier build stages), skipping those lines and noting
	// them in the trace; without it such a task fails the run as a
	// ConfigError.
	SkipUnsupported bool
	// SDKTimeout is the request timeout harness SDKs are given
	// (harness.SDKTimeoutEnv): the longest the interception server may take
	// to begin an answer while it retries the provider; 0 sets none.
	SDKTimeout time.Duration
	// VerifyGrace is how long past RunInput.VerifyWithin a workspace waits
	// for its Verify before it is removed; 0 is a minute.
	VerifyGrace time.Duration
	Logger      *slog.Logger
	// Signal sends a workflow a signal; nil sends it with the activity's
	// own Temporal client. Tests replace it.
	Signal func(ctx context.Context, workflowID, runID, name string, arg any) error

	// DrainTimeout is how long a rollout running when its worker begins to
	// stop may go on; past it the rollout is handed back (drain.go) and
	// retried elsewhere at once. 0 hands it back as the worker stops.
	DrainTimeout time.Duration

	// leases are the rollout attempts this worker holds (lease.go).
	leases leases
	// drain ends draining rollouts early (HandBack).
	drain drain
	// Metrics counts the rollouts Run runs; nil counts nothing.
	Metrics *metrics.Metrics
}

// prices is the table judge calls are priced at.
func (a *Activities) prices() prices.Table {
	if a.Prices == nil {
		return prices.Default()
	}
	return a.Prices
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

// DescribeTaskset opens a taskset and reports its size. A task this
// worker's runtime cannot honour (a Harbor task's /app under the local
// runtime) fails the run here, at its start, before any rollout is
// scored: the tasks of a finite taskset of up to checkLimit tasks are
// checked, each refused one named.
func (a *Activities) DescribeTaskset(ctx context.Context, in rollout.DescribeTasksetInput) (rollout.DescribeTasksetResult, error) {
	ts, err := a.Tasksets.Open(in.Taskset)
	if err != nil {
		return rollout.DescribeTasksetResult{}, openErr(err)
	}
	if err := a.checkTasks(ctx, ts); err != nil {
		return rollout.DescribeTasksetResult{}, err
	}
	return rollout.DescribeTasksetResult{Len: ts.Len()}, nil
}

// checkLimit is the most tasks a run's start checks against the runtime;
// the tasks of a larger taskset are checked as each runs.
const checkLimit = 10000

// checkTasks checks a taskset's tasks against the runtime: the first
// refusal fails the run as a ConfigError, with how many tasks it refuses.
func (a *Activities) checkTasks(ctx context.Context, ts tasksets.Taskset) error {
	c, ok := harness.CheckerOf(a.Runtime)
	n := ts.Len()
	if !ok || n < 0 || n > checkLimit {
		return nil
	}
	var first error
	refused := 0
	for i := range n {
		task, err := ts.Task(ctx, i)
		if err != nil {
			return nil // the rollout of that task reports it
		}
		if err := c.CheckTask(task); err != nil {
			if first == nil {
				first = err
			}
			refused++
		}
	}
	if first == nil {
		return nil
	}
	if refused > 1 {
		return configErr(fmt.Errorf("%w (and %d more of the taskset's %d tasks are refused alike)", first, refused-1, n))
	}
	return configErr(first)
}

// Acquire waits for capacity on this worker and registers the rollout on an
// interception server. Retried Acquires of the same key are idempotent. An
// interception server that cannot listen on its fixed port (the custom
// tunnel's) is a ConfigError: it fails the same way on every retry.
func (a *Activities) Acquire(ctx context.Context, in rollout.AcquireInput) (rollout.AcquireResult, error) {
	key := in.Rollout.Key()
	if s, ok, err := a.stored(ctx, in.Rollout); err != nil {
		return rollout.AcquireResult{}, err
	} else if ok {
		return rollout.AcquireResult{Done: &s}, nil
	}
	h := in.Rollout.Harness
	policy, err := a.route(rollout.RolePolicy, h.Roles.Policy)
	if err != nil {
		return rollout.AcquireResult{}, err
	}
	user, err := a.route(rollout.RoleUser, h.Roles.User)
	if err == nil {
		// Checked here too, so that no harness runs for a rollout this
		// worker could not score.
		_, err = a.route(rollout.RoleJudge, h.Roles.Judge)
	}
	if err != nil {
		return rollout.AcquireResult{}, err
	}
	// A stopping worker takes nothing more: what waits here goes to
	// another worker at once.
	ctx, end := a.untilStopped(ctx, 0)
	defer end()
	l, err := a.openLease(ctx, key, func() { activity.RecordHeartbeat(ctx, "waiting for capacity") })
	if err != nil {
		if stoppedBy(ctx) {
			return rollout.AcquireResult{}, handedBack("the rollout had a slot")
		}
		return rollout.AcquireResult{}, err
	}
	reg, err := l.register(ctx, a.Pool, interception.Rollout{Key: key, Model: in.Rollout.Model, Sampling: dialects.Sampling(in.Rollout.Sampling),
		Limits: interception.Limits{Turns: h.MaxTurns, Tokens: h.MaxTokensTotal, ModelTime: h.MaxModelTime, CostUSD: h.MaxCostUSD},
		Tokens: tokenRequest(h), TokenIn: h.TokenIn, PolicyVersion: in.Rollout.PolicyVersion, PolicyVersionHeader: h.PolicyVersionHeader,
		Policy: policy, User: user})
	if err != nil {
		l.Close()
		var re *interception.RouteError
		if errors.As(err, &re) {
			return rollout.AcquireResult{}, configErr(err)
		}
		if cerr := listenConfigErr(err); cerr != nil {
			return rollout.AcquireResult{}, cerr
		}
		return rollout.AcquireResult{}, fmt.Errorf("acquire slot: %w", err)
	}
	res := rollout.AcquireResult{HostQueue: a.HostQueue, Server: reg.Server}
	if in.Hold == "" {
		return res, nil
	}
	return res, a.hold(ctx, in, l, reg)
}

// hold tells the workflow where the slot is and waits, heartbeating, until
// the rollout's Run starts here or the slot is given back. When the
// workflow cancels the hold (the rollout will not run here), or the signal
// cannot be sent, the lease is closed.
func (a *Activities) hold(ctx context.Context, in rollout.AcquireInput, l *lease, reg *interception.Registration) error {
	started := l.unit.Hold()
	defer l.unit.Unhold()
	sig := rollout.Slot{Token: in.Hold, Key: l.key, HostQueue: a.HostQueue, Server: reg.Server}
	if a.Pool.Loopback() {
		// Nothing to expose: the harness reaches the server on this host.
		url, err := reg.Expose(ctx)
		if err != nil {
			l.Close()
			return temporal.NewApplicationErrorWithCause("expose interception server", rollout.ErrTypeTunnel, err)
		}
		sig.BaseURL = url
	}
	info := activity.GetInfo(ctx)
	if err := a.signal(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, rollout.SignalSlot, sig); err != nil {
		l.Close()
		return fmt.Errorf("tell the workflow where slot %s is: %w", l.key, err)
	}
	stop := heartbeat(ctx, "holding the slot until the rollout runs")
	defer stop()
	select {
	case <-started:
		return nil
	case <-ctx.Done():
		select {
		case <-started: // the Run came first
			return nil
		default:
		}
		l.Close()
		if stoppedBy(ctx) {
			return handedBack("the rollout's run started")
		}
		return ctx.Err()
	}
}

func (a *Activities) signal(ctx context.Context, workflowID, runID, name string, arg any) error {
	if a.Signal != nil {
		return a.Signal(ctx, workflowID, runID, name, arg)
	}
	return activity.GetClient(ctx).SignalWorkflow(ctx, workflowID, runID, name, arg)
}

// Expose makes the slot's interception server reachable and returns its URL.
// Tunnel failures are retryable TunnelErrors, visible as retries in the UI.
func (a *Activities) Expose(ctx context.Context, in rollout.ExposeInput) (rollout.ExposeResult, error) {
	reg := a.lease(in.Key).registration()
	if reg == nil {
		return rollout.ExposeResult{}, slotLost(in.Key)
	}
	stop := heartbeat(ctx, "exposing the interception server")
	url, err := reg.Expose(ctx)
	stop()
	if err != nil {
		return rollout.ExposeResult{}, temporal.NewApplicationErrorWithCause("expose interception server", rollout.ErrTypeTunnel, err)
	}
	return rollout.ExposeResult{BaseURL: url}, nil
}

// slotLost is the error of a step whose slot this worker does not hold.
func slotLost(key string) error {
	return temporal.NewNonRetryableApplicationError("slot "+key+" is not held by this worker", rollout.ErrTypeSlotLost, nil)
}

// Release frees a slot whose rollout will not run.
func (a *Activities) Release(ctx context.Context, in rollout.ReleaseInput) error {
	a.lease(in.Key).Close()
	return nil
}

// Finish writes a run's summary to the run store.
func (a *Activities) Finish(ctx context.Context, in rollout.FinishInput) error {
	return a.Store.WriteSummary(ctx, in.RunID, in.Summary)
}

// stored returns the rollout's stored summary when the run store holds a
// result to reuse: any result, or only a success when the rollout reruns
// failures.
func (a *Activities) stored(ctx context.Context, ref rollout.Ref) (rollout.Summary, bool, error) {
	rec, ok, err := a.storedRecord(ctx, ref)
	if err != nil || !ok || !reusable(ref, rec) {
		return rollout.Summary{}, false, err
	}
	s, err := a.withTokens(ctx, ref, reused(rec))
	return s, err == nil, err
}

// storedRecord reads the rollout's record from the run store, if it has one.
func (a *Activities) storedRecord(ctx context.Context, ref rollout.Ref) (results.Record, bool, error) {
	rec, ok, err := a.Store.Get(ctx, ref.RunID, ref.Key())
	if err != nil {
		return results.Record{}, false, fmt.Errorf("read run store: %w", err)
	}
	return rec, ok, nil
}

// reusable reports whether a stored record stands for the rollout: a
// success always does, a failure unless the rollout reruns failures, and
// a task refused as configured never (it may have been fixed since).
func reusable(ref rollout.Ref, rec results.Record) bool {
	return rec.Status == rollout.StatusOK || !ref.RetryFailed && rec.ErrorKind != rollout.KindConfig
}

func reused(rec results.Record) rollout.Summary {
	s := summaryOf(rec)
	s.Reused = true
	return s
}

func summaryOf(r results.Record) rollout.Summary {
	return rollout.Summary{
		Key: r.Key, Index: r.Index, K: r.K, Reward: r.Reward, Status: r.Status,
		ErrorKind: r.ErrorKind, Error: r.Error, Turns: r.Turns,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, DurationMS: r.DurationMS,
		CostUSD: r.CostUSD, UnpricedTurns: r.UnpricedTurns, Trace: r.Trace,
	}
}

// heartbeat records heartbeats until stop is called, so a dead worker's
// rollout is noticed within the heartbeat timeout.
func heartbeat(ctx context.Context, doing string) (stop func()) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 4
	if every <= 0 {
		return func() {}
	}
	every = max(every, 200*time.Millisecond)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, doing)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// taskErr classifies a failed task read: a cancelled activity (a stopping
// worker) is retried elsewhere; anything else is the taskset's fault.
func taskErr(ctx context.Context, taskset string, index int64, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return configErr(fmt.Errorf("task %d of %q: %w", index, taskset, err))
}

// listenConfigErr is the ConfigError of an interception server that cannot
// listen on a fixed port, or nil for any other failure. A port chosen by the
// system (0) is never in use.
func listenConfigErr(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" {
		return nil
	}
	addr, ok := op.Addr.(*net.TCPAddr)
	if !ok || addr.Port == 0 {
		return nil
	}
	var reason string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		reason = fmt.Sprintf("port %d is in use", addr.Port)
	case errors.Is(err, syscall.EACCES):
		reason = fmt.Sprintf("port %d needs privileges this worker does not have", addr.Port)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		reason = fmt.Sprintf("address %s is not on this host", addr)
	default:
		return nil
	}
	return configErr(fmt.Errorf("the interception server cannot listen: %s (the custom tunnel's --interception.port)", reason))
}

// openErr is the error of a taskset that does not open: a ConfigError,
// but for a registry task's repository that could not be reached, which
// is the infrastructure's fault and retried.
func openErr(err error) error {
	var fe *tasksets.FetchError
	if errors.As(err, &fe) {
		return temporal.NewApplicationError(err.Error(), rollout.ErrTypeRuntime)
	}
	return configErr(err)
}

func configErr(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), rollout.ErrTypeConfig, nil)
}

func shortErr(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tokenRequest is what the interception asks upstreams for when the run
// traces tokens; nil when it does not.
func tokenRequest(h rollout.HarnessConfig) *dialects.TokenRequest {
	if !h.TraceTokens && !h.TokenIn {
		return nil
	}
	return &dialects.TokenRequest{TopLogprobs: h.TopLogprobs}
}
