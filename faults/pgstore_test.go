package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/pull"
	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/results/export"
	"github.com/evalflow/evalflow/results/postgres"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/workflows"
)

// pgWorker runs a worker process with a runs directory of its own and the
// PostgreSQL store, whose URL it gets from its environment (never its
// command line, which any user of the host can read).
func pgWorker(t *testing.T, addr, url, name, queue string) *proc {
	t.Helper()
	return spawnLogged(t, []string{"EVALFLOW_STORE=" + url}, name, "worker",
		"--address", addr, "--runs-dir", caseDir(t), "--task-queue", queue, "--max-rollouts", "12",
		"--mock-latency", "100ms", "--mock-error-rate", "0", "--log-level", "warn")
}

func openPG(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// requireOncePG asserts a run stored n rollouts once each, all ok, each
// with the attempt that made its record among its stored attempts.
func requireOncePG(t *testing.T, s results.Store, runID string, n int) []results.Record {
	t.Helper()
	ctx := context.Background()
	recs, err := s.List(ctx, runID)
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, r := range recs {
		keys[r.Key] = true
		assert.Equal(t, rollout.StatusOK, r.Status, "%s ended %s (%s): %s", r.Key, r.Status, r.ErrorKind, r.Error)
		ats, err := s.Attempts(ctx, runID, r.Key)
		require.NoError(t, err)
		var found bool
		for _, at := range ats {
			found = found || at.N == r.Attempt
		}
		assert.True(t, found, "%s: the record's attempt %d is stored (%d attempts)", r.Key, r.Attempt, len(ats))
	}
	assert.Len(t, keys, n, "every rollout stored")
	assert.Len(t, recs, n, "no rollout stored twice")
	return recs
}

// noRunFiles asserts a worker's runs directory holds nothing of any run:
// with the PostgreSQL store, workers share no files.
func noRunFiles(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && (d.Name() == "rollouts.jsonl" || d.Name() == "traces") {
				t.Errorf("%s: run files with the PostgreSQL store", path)
			}
			return nil
		})
	}
}

// TestPostgresStoreAcrossWorkers: two worker processes that share no
// directory write one PostgreSQL store. An eval loses one of them to
// SIGKILL halfway and still stores each rollout once; a 2-epoch training
// run follows on a replacement; a trainer pulls groups with their traces;
// and `starter results` and `starter export`, run from a third directory,
// read every trace. The store's password is in the suite's secret scan.
func TestPostgresStoreAcrossWorkers(t *testing.T) {
	t.Parallel()
	url, password := pgtest.URLWithOwnRole(t)
	addSecret(t, "postgres-password", password)
	store := openPG(t, url)
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	queue := "faults-pgstore"
	doomed := pgWorker(t, srv.addr, url, "worker-a", queue)
	pgWorker(t, srv.addr, url, "worker-b", queue)

	const n = 120
	cfg := evalConfig("pg-eval", n, 24)
	run := startEval(t, c, queue, cfg)
	count := func() int {
		recs, err := store.List(context.Background(), cfg.RunID)
		if err != nil {
			return -1
		}
		return len(recs)
	}
	require.Eventually(t, func() bool { return count() >= n/3 }, 3*time.Minute, 20*time.Millisecond)
	atKill := count()
	doomed.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	recs := requireOncePG(t, store, cfg.RunID, n)
	moved := 0
	for _, r := range recs {
		if r.Attempt > 1 {
			moved++
		}
	}
	figure(t, "PostgreSQL store, worker SIGKILL at %d/%d stored: %d stored once, %d rollouts re-run on the other worker", atKill, n, n, moved)

	// Training: two epochs on a replacement worker and the survivor.
	pgWorker(t, srv.addr, url, "worker-c", queue)
	pgTrainRunsTwoEpochs(t, ctx, c, store, queue)
	pgTrainerPullsTraces(t, ctx, c, store, queue)
	pgRunsReadFromAnotherMachine(t, url, password, n)
}

// pgTrainRunsTwoEpochs: a training run of two epochs on the store.
func pgTrainRunsTwoEpochs(t *testing.T, ctx context.Context, c client.Client, store *postgres.Store, queue string) {
	t.Helper()
	train := workflows.TrainInput{
		Config: workflows.RunConfig{RunID: "pg-train", Taskset: "arithmetic", Tasks: 10, RolloutsPerTask: 2,
			MaxConcurrent: 12, Model: "mock", Limits: workflows.Limits{HeartbeatTimeout: 5 * time.Second}}.WithDefaults(),
		Train: workflows.TrainConfig{Epochs: 2},
	}
	trun, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: train.Config.RunID, TaskQueue: queue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.TrainName, train)
	require.NoError(t, err)
	require.NoError(t, trun.Get(ctx, nil))
	requireOncePG(t, store, "pg-train", 2*10*2)
	epochs, err := store.Epochs(ctx, "pg-train")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, epochs)
}

// pgTrainerPullsTraces: a trainer (this process: no directory shared with
// the workers) pulls a group and gets its traces from the store.
func pgTrainerPullsTraces(t *testing.T, ctx context.Context, c client.Client, store *postgres.Store, queue string) {
	t.Helper()
	p, err := pull.Start(ctx, c, queue, workflows.RunConfig{RunID: "pg-pull", Taskset: "arithmetic", Tasks: 10,
		MaxConcurrent: 4, Model: "mock"}.WithDefaults(), workflows.TrainConfig{}, pull.WithTraces(results.TraceJSON{Store: store}))
	require.NoError(t, err)
	ref, err := p.Sample(ctx)
	require.NoError(t, err)
	group, err := p.RunGroup(ctx, ref, 3)
	require.NoError(t, err)
	require.Len(t, group.Traces, 3)
	for i, s := range group.Rollouts {
		var tr trace.Rollout
		require.NoError(t, json.Unmarshal(group.Traces[i], &tr))
		assert.Equal(t, s.Key, tr.Key)
		assert.NotEmpty(t, tr.Turns, "a complete trace")
		assert.Len(t, tr.Turns, s.Turns)
		assert.False(t, filepath.IsAbs(s.Trace), "%s: a name in the store, not a host path", s.Trace)
	}
	require.NoError(t, p.Close(ctx))
}

// pgRunsReadFromAnotherMachine: any machine that reaches the database
// reads the runs (`starter results`, `starter export`, from a directory
// of their own), and leaves no run file anywhere.
func pgRunsReadFromAnotherMachine(t *testing.T, url, password string, n int) {
	t.Helper()
	third := caseDir(t)
	for runID, want := range map[string]int{"pg-eval": n, "pg-train": 40} {
		lines := starterOutput(t, third, url, "results", "--rollouts", runID)
		sc := bufio.NewScanner(bytes.NewReader(lines))
		sc.Buffer(nil, 16<<20)
		keys := map[string]bool{}
		for sc.Scan() {
			var line struct {
				Key       string         `json:"key"`
				TraceBody *trace.Rollout `json:"trace_body"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
			keys[line.Key] = true
			if assert.NotNil(t, line.TraceBody, "%s has its trace", line.Key) {
				assert.Equal(t, line.Key, line.TraceBody.Key)
				assert.NotEmpty(t, line.TraceBody.Turns)
			}
		}
		require.NoError(t, sc.Err())
		assert.Len(t, keys, want, "starter results --rollouts %s", runID)
	}
	out := filepath.Join(third, "pg-eval.parquet")
	starterOutput(t, third, url, "export", "--format", "parquet", "--out", out, "pg-eval")
	rows, err := parquet.ReadFile[export.Row](out)
	require.NoError(t, err)
	assert.Len(t, rows, n)
	for _, r := range rows {
		assert.NotEmpty(t, r.Prompt, r.Key)
		assert.GreaterOrEqual(t, r.Attempts, int64(1))
	}
	summary := string(starterOutput(t, third, url, "results", "pg-eval"))
	assert.Contains(t, summary, "pg-eval")
	assert.NotContains(t, summary, password)
	noRunFiles(t, third)
	entries, err := os.ReadDir(filepath.Dir(third))
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), t.Name()+"-") { // this case's directories
			noRunFiles(t, filepath.Join(filepath.Dir(third), e.Name()))
		}
	}
}

// starterOutput runs the starter in dir with the store's URL in its
// environment and returns its standard output.
func starterOutput(t *testing.T, dir, url string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "starter"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EVALFLOW_STORE="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "starter %s: %s", strings.Join(args, " "), stderr.String())
	return out
}

// TestPostgresRestartedMidRun: the database goes down while two workers
// store an eval's rollouts and comes back; the rollouts wait, retrying
// with backoff, and the run stores each once.
func TestPostgresRestartedMidRun(t *testing.T) {
	cluster := pgtest.StartCluster(t)
	srv := startServer(t)
	c := dial(t, srv.addr)
	defer c.Close()
	queue := "faults-pg-restart"
	a := pgWorker(t, srv.addr, cluster.URL, "worker-a", queue)
	b := pgWorker(t, srv.addr, cluster.URL, "worker-b", queue)
	const n = 120
	cfg := evalConfig("pg-restart", n, 24)
	run := startEval(t, c, queue, cfg)

	store, err := postgres.Open(context.Background(), cluster.URL, postgres.Options{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		recs, err := store.List(context.Background(), cfg.RunID)
		return err == nil && len(recs) >= n/4
	}, 3*time.Minute, 20*time.Millisecond)
	store.Close()
	cluster.Stop(t)
	down := time.Now()
	require.Eventually(t, func() bool {
		for _, p := range []*proc{a, b} {
			if log, _ := os.ReadFile(p.log); strings.Contains(string(log), "run store unreachable") {
				return true
			}
		}
		return false
	}, 2*time.Minute, 20*time.Millisecond, "a worker waits for the database")
	cluster.Start(t)
	outage := time.Since(down)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	assert.Equal(t, int64(n), res.OK)
	store = openPG(t, cluster.URL)
	requireOncePG(t, store, cfg.RunID, n)
	figure(t, "PostgreSQL stopped for %s mid-run: %d rollouts stored once, none failed", outage.Round(time.Millisecond), n)
}
