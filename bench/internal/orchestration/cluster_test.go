package orchestration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/devserver/devtest"
	"github.com/evalflow/evalflow/internal/namespace"
	"github.com/evalflow/evalflow/internal/temporalcluster"
)

// BenchmarkEvalEmbeddedVsCluster runs one eval of no-op rollouts on the
// embedded server (SQLite, one process) and on the real server as four
// processes on PostgreSQL (deploy/temporal/config.yaml, 16 shards), each
// with one in-process worker, alternating, in one run. Each iteration is a
// whole eval; run with -benchtime 1x -count N. Figures: rollouts/s, and the
// history events a rollout costs (the longest run of the chain over the
// rollouts it held), which docs/scaling.md plans with.
func BenchmarkEvalEmbeddedVsCluster(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	_, embedded := devtest.StartEvalflow(b)
	cc := temporalcluster.ForTest(b, temporalcluster.Options{Shards: 16}).Dial(b, "default")
	_, err := namespace.Ensure(ctx, namespace.Services{Workflow: cc.WorkflowService(), Operator: cc.OperatorService()}, namespace.Evalflow("default"))
	require.NoError(b, err)

	const rollouts, concurrency = 500, 64
	systems := []struct {
		name   string
		client client.Client
	}{{"embedded", embedded}, {"cluster", cc}}
	for _, sys := range systems {
		b.Run(sys.name, func(b *testing.B) {
			cfg := Config{Rollouts: rollouts, Concurrency: concurrency, RunsDir: b.TempDir()}
			queue := "bench-" + sys.name
			w, err := NewWorker(sys.client, queue, cfg)
			require.NoError(b, err)
			defer w.Stop()
			var last Result
			for i := range b.N {
				last, err = Temporal(ctx, sys.client, queue, fmt.Sprintf("bench-%s-%d-%d", sys.name, time.Now().UnixNano(), i), cfg)
				require.NoError(b, err)
				require.Zero(b, last.Failed)
			}
			b.ReportMetric(last.RolloutsPerSec, "rollouts/s")
			b.ReportMetric(last.WallSeconds, "wall-s")
			b.ReportMetric(float64(last.MaxHistory)/float64(min(rollouts, last.perRun())), "events/rollout")
			b.ReportMetric(last.ScheduleToStart.P50/1000, "sched-to-start-p50-ms")
		})
	}
}

// perRun is how many rollouts the longest run of the chain held.
func (r Result) perRun() int {
	if r.Runs <= 1 {
		return r.Rollouts
	}
	return (r.Rollouts + r.Runs - 1) / r.Runs
}
