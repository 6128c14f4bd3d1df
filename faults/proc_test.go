package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/workflows"
)

// proc is a child process of the suite: one of its binaries.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// spawn starts binary name of bin with args, its output in a log file.
func spawn(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return spawnEnv(t, nil, name, args...)
}

// spawnEnv is spawn with env added to the suite's environment.
func spawnEnv(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	return spawnLogged(t, env, name, name, args...)
}

// spawnLogged is spawnEnv with the output in logName.log, for a case with
// several processes of one binary.
func spawnLogged(t *testing.T, env []string, logName, name string, args ...string) *proc {
	t.Helper()
	log := filepath.Join(caseDir(t), logName+".log")
	f, err := os.Create(log)
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// The suite's children die with it, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	_ = f.Close()
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("%s output:\n%s", name, tail(string(b), 4000))
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// wait waits for the process to exit on its own and returns its error.
func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("%s still running after %s", p.name, d)
		return nil
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// startWorker runs a worker process on the server's queue, storing into
// runsDir; the lean agent beside it is the built-in harness.
func startWorker(t *testing.T, addr, runsDir, queue string, args ...string) *proc {
	t.Helper()
	return startWorkerEnv(t, nil, addr, runsDir, queue, args...)
}

// startWorkerEnv is startWorker with env added to the suite's environment.
func startWorkerEnv(t *testing.T, env []string, addr, runsDir, queue string, args ...string) *proc {
	t.Helper()
	base := []string{"--address", addr, "--runs-dir", runsDir, "--task-queue", queue,
		"--mock-latency", "100ms", "--mock-error-rate", "0", "--log-level", "warn"}
	return spawnEnv(t, env, "worker", append(base, args...)...)
}

// stored reads a run's records: the number of lines and of distinct keys.
func stored(t *testing.T, runsDir, runID string) (recs []results.Record, keys map[string]int) {
	t.Helper()
	store, err := results.Open(runsDir)
	require.NoError(t, err)
	recs, err = store.List(context.Background(), runID)
	require.NoError(t, err)
	keys = map[string]int{}
	for _, r := range recs {
		keys[r.Key]++
	}
	return recs, keys
}

// waitStored waits until at least n of a run's rollouts are stored.
func waitStored(t *testing.T, runsDir, runID string, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return countStored(runsDir, runID) >= n },
		within, 20*time.Millisecond, "%d rollouts of %s stored", n, runID)
}

// countStored is how many distinct rollouts of a run are stored, -1 when
// the store cannot be read.
func countStored(runsDir, runID string) int {
	store, err := results.Open(runsDir)
	if err != nil {
		return -1
	}
	recs, err := store.List(context.Background(), runID)
	if err != nil {
		return -1
	}
	keys := map[string]bool{}
	for _, r := range recs {
		keys[r.Key] = true
	}
	return len(keys)
}

// evalConfig is a run of tasks arithmetic tasks with a short heartbeat
// timeout, so a dead worker's rollouts move within seconds.
func evalConfig(runID string, tasks int64, concurrent int) workflows.RunConfig {
	return workflows.RunConfig{
		RunID: runID, Taskset: "arithmetic", Tasks: tasks, MaxConcurrent: concurrent, Model: "mock",
		Limits: workflows.Limits{HeartbeatTimeout: 5 * time.Second},
	}.WithDefaults()
}

func startEval(t *testing.T, c client.Client, queue string, cfg workflows.RunConfig) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: cfg.RunID, TaskQueue: queue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.EvalName, workflows.EvalInput{Config: cfg})
	require.NoError(t, err)
	return run
}

// requireExactlyOnce asserts a finished run stored each of its n rollouts
// once, every one ok: nothing lost, nothing twice, no infrastructure fault
// scored against the agent.
func requireExactlyOnce(t *testing.T, runsDir, runID string, n int) []results.Record {
	t.Helper()
	recs, keys := stored(t, runsDir, runID)
	assert.Len(t, keys, n, "every rollout stored")
	assert.Len(t, recs, n, "no rollout stored twice")
	for _, r := range recs {
		assert.Equal(t, rollout.StatusOK, r.Status, "%s ended %s (%s): %s", r.Key, r.Status, r.ErrorKind, r.Error)
	}
	return recs
}
