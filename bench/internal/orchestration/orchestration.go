// Package orchestration measures what running rollouts as Temporal
// workflows costs: an eval of no-op rollouts on the embedded server and a
// worker from wiring.NewWorker, against the same rollout activities run by
// an in-process errgroup with the same concurrency.
package orchestration

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/bench/internal/loadgen"
	"github.com/evalflow/evalflow/internal/devserver"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/wiring"
	"github.com/evalflow/evalflow/workflows"
)

// Config is one orchestration benchmark.
type Config struct {
	// Rollouts is how many rollouts the eval runs (one per task).
	Rollouts int
	// Concurrency bounds the rollouts in flight, in both systems.
	Concurrency int
	// Harness is the no-op harness command; ["true"] when empty.
	Harness []string
	// RunsDir is the run store's root.
	RunsDir string
	// StoreURL, when set, is a PostgreSQL run store used instead of RunsDir
	// (by the Temporal worker; the errgroup baseline always writes files).
	StoreURL string
	// ContinueAsNewAfter is the eval's segment length; the default when 0.
	ContinueAsNewAfter int
}

func (c Config) harness() []string {
	if len(c.Harness) == 0 {
		return []string{"true"}
	}
	return c.Harness
}

// Result is one system's run of Config.
type Result struct {
	System         string  `json:"system"`
	Rollouts       int     `json:"rollouts"`
	Concurrency    int     `json:"concurrency"`
	Failed         int64   `json:"failed"`
	WallSeconds    float64 `json:"wall_s"`
	RolloutsPerSec float64 `json:"rollouts_per_s"`
	// ScheduleToStart is, per activity (per step for the errgroup), from
	// being scheduled to starting.
	ScheduleToStart loadgen.Summary `json:"schedule_to_start"`
	// ByActivity is ScheduleToStart by activity type (Temporal only).
	ByActivity map[string]loadgen.Summary `json:"schedule_to_start_by_activity,omitempty"`
	// Runs counts the workflow runs of the eval's continue-as-new chain and
	// MaxHistory is the longest history among them, in events.
	Runs       int `json:"runs,omitempty"`
	MaxHistory int `json:"max_history_events,omitempty"`
}

// Server is an embedded Temporal server and a client of it.
type Server struct {
	Srv    *devserver.Server
	Client client.Client
}

// StartServer starts an embedded server persisted in dir on free ports.
func StartServer(ctx context.Context, dir string) (*Server, error) {
	srv, err := devserver.StartOnFreePort(ctx, devserver.Config{
		DataDir: dir, UIPort: -1,
		SearchAttributes: namespace.Attributes(),
	})
	if err != nil {
		return nil, fmt.Errorf("start embedded temporal: %w", err)
	}
	c, err := wiring.Dial(ctx, srv.Address(), "default", slog.New(slog.DiscardHandler), time.Minute)
	if err != nil {
		_ = srv.Stop()
		return nil, err
	}
	return &Server{Srv: srv, Client: c}, nil
}

// Close closes the client and stops the server.
func (s *Server) Close() error {
	s.Client.Close()
	return s.Srv.Stop()
}

// RunConfig is the eval both systems run: cfg.Rollouts tasks of the
// generated arithmetic taskset, one rollout each, with the no-op harness.
func RunConfig(runID string, cfg Config) workflows.RunConfig {
	return workflows.RunConfig{
		RunID: runID, Taskset: "arithmetic", Tasks: int64(cfg.Rollouts), MaxConcurrent: cfg.Concurrency,
		Model: "bench", Rubric: "exact",
		Harness: workflowsHarness(cfg.harness()),
		Limits:  workflows.Limits{ContinueAsNewAfter: cfg.ContinueAsNewAfter},
	}.WithDefaults()
}
