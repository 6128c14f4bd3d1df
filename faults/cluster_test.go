package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/results/postgres/pgtest"
	"github.com/evalflow/evalflow/internal/temporalcluster"
	"github.com/evalflow/evalflow/workflows"
)

// startSecureCluster is the real Temporal server as four processes on
// PostgreSQL (deploy/temporal/config.yaml), mTLS at its frontend with a CA
// of the test's own, its logs in the case's directory. Its keys, outside
// the scanned suite root, are secrets the scan looks for.
func startSecureCluster(t *testing.T, bindIP string) *temporalcluster.Secure {
	t.Helper()
	s := temporalcluster.StartSecure(t, temporalcluster.Options{Dir: caseDir(t), Shards: 16, BindIP: bindIP})
	for _, key := range []string{s.Server.KeyFile, s.Client.KeyFile} {
		b, err := os.ReadFile(key)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		addSecret(t, "tls-key "+filepath.Base(key), lines[1])
	}
	return s
}

// setup runs `starter setup` against the cluster, as the docs say to.
func setup(t *testing.T, s *temporalcluster.Secure) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "starter"), append([]string{"setup"}, s.Flags("127.0.0.1")...)...).CombinedOutput()
	require.NoError(t, err, "starter setup: %s", out)
	return string(out)
}

// forward relays TCP connections from listen to target until the test ends:
// a network namespace reaches the host's loopback-only PostgreSQL this way.
func forward(t *testing.T, listen, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return ln.Addr().String()
}

// netnsWorker runs a worker process in a network namespace of its own: it
// reaches the cluster's frontend and the store only at the host's veth
// address, as a worker on another machine would over the network.
func netnsWorker(t *testing.T, s *temporalcluster.Secure, storeURL, subnet, name, queue string) {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "network namespaces need root (make test runs as root in CI)")
	n, err := local.NewNetns(context.Background(), subnet, local.Runtime{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	u, err := url.Parse(storeURL)
	require.NoError(t, err)
	u.Host = forward(t, net.JoinHostPort(n.HostIP, "0"), u.Host)
	args := append([]string{"netns", "exec", n.Name, filepath.Join(bin, "worker")}, s.Flags(n.HostIP)...)
	args = append(args, "--runs-dir", caseDir(t), "--task-queue", queue, "--max-rollouts", "16",
		"--mock-latency", "50ms", "--mock-error-rate", "0", "--log-level", "warn")
	log := filepath.Join(caseDir(t), name+".log")
	f, err := os.Create(log)
	require.NoError(t, err)
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), "EVALFLOW_STORE="+u.String())
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	_ = f.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("%s output:\n%s", name, tail(string(b), 4000))
		}
	})
}

// TestEvalAndTrainOnAMultiProcessCluster is the cluster path of
// docs/clusters.md, run as an operator runs it: the Temporal server's four
// services as processes of their own on PostgreSQL with mTLS at the
// frontend, `starter setup` for the namespace's search attributes, two
// workers each in a network namespace with the PostgreSQL run store, and an
// eval and a training run started by the starter binary. Every rollout is
// stored once, and the run is found by its search attribute.
func TestEvalAndTrainOnAMultiProcessCluster(t *testing.T) {
	t.Parallel()
	s := startSecureCluster(t, "0.0.0.0")
	out := setup(t, s)
	assert.Contains(t, out, "search attributes EvalflowHarness, EvalflowModel, EvalflowRunId, EvalflowTaskset added")
	storeURL, password := pgtest.URLWithOwnRole(t)
	addSecret(t, "postgres-password", password)
	store := openPG(t, storeURL)
	queue := "faults-cluster"
	netnsWorker(t, s, storeURL, "10.213.40.0", "worker-a", queue)
	netnsWorker(t, s, storeURL, "10.213.40.4", "worker-b", queue)

	const n = 96
	started := time.Now()
	out = string(starterOutputEnv(t, []string{"EVALFLOW_STORE=" + storeURL}, append(s.Flags("127.0.0.1"),
		"eval", "--run-id", "cluster-eval", "--taskset", "arithmetic", "--tasks", itoa(n), "--max-concurrent", "24",
		"--task-queue", queue, "--data-dir", caseDir(t))...))
	evalTime := time.Since(started)
	assert.Contains(t, out, "cluster-eval")
	requireOncePG(t, store, "cluster-eval", n)

	out = string(starterOutputEnv(t, []string{"EVALFLOW_STORE=" + storeURL}, append(s.Flags("127.0.0.1"),
		"train", "--run-id", "cluster-train", "--taskset", "arithmetic", "--tasks", "16", "--epochs", "2",
		"--group-size", "2", "--max-concurrent", "16", "--task-queue", queue, "--data-dir", caseDir(t))...))
	requireOncePG(t, store, "cluster-train", 2*16*2)

	c := s.Dial(t, "default")
	var found []string
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("%s = 'cluster-eval'", workflows.AttrRunID),
		})
		if err != nil {
			return false
		}
		found = found[:0]
		for _, e := range resp.Executions {
			found = append(found, e.Execution.WorkflowId)
		}
		return len(found) > 0
	}, time.Minute, 250*time.Millisecond, "the run is found by its search attribute (visibility on PostgreSQL)")
	figure(t, "multi-process cluster (4 server processes, mTLS, PostgreSQL, 2 workers in network namespaces): eval of %d rollouts in %.1f s, a 2-epoch train of 64; all stored once", n, evalTime.Seconds())
}

// starterOutputEnv runs the starter binary to its end with env added and
// returns its output; it fails the test when the starter fails.
func starterOutputEnv(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	// Flags of the connection come first in args; the command after them.
	cmdAt := 0
	for i, a := range args {
		if a == "eval" || a == "train" || a == "resume" || a == "status" {
			cmdAt = i
			break
		}
	}
	argv := append(append([]string{args[cmdAt]}, args[:cmdAt]...), args[cmdAt+1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "starter"), argv...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = caseDir(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "starter %s: %s", strings.Join(argv, " "), tail(string(out), 4000))
	return out
}

// killMidRun runs an eval on the cluster with two workers on the host,
// SIGKILLs services once a third of it is stored, restarts them, and
// checks every rollout was stored once.
func killMidRun(t *testing.T, runID string, services ...string) {
	s := startSecureCluster(t, "127.0.0.1")
	setup(t, s)
	storeURL, password := pgtest.URLWithOwnRole(t)
	addSecret(t, "postgres-password", password)
	store := openPG(t, storeURL)
	queue := "faults-" + runID
	for _, name := range []string{"worker-a", "worker-b"} {
		spawnLogged(t, []string{"EVALFLOW_STORE=" + storeURL}, name, "worker", append(s.Flags("127.0.0.1"),
			"--runs-dir", caseDir(t), "--task-queue", queue, "--max-rollouts", "16",
			"--mock-latency", "100ms", "--mock-error-rate", "0", "--log-level", "warn")...)
	}
	c := s.Dial(t, "default")
	const n = 150
	cfg := evalConfig(runID, n, 24)
	run := startEval(t, c, queue, cfg)
	count := func() int {
		recs, err := store.List(context.Background(), runID)
		if err != nil {
			return -1
		}
		return len(recs)
	}
	require.Eventually(t, func() bool { return count() >= n/3 }, 3*time.Minute, 20*time.Millisecond)
	atKill := count()
	s.Kill(services...)
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	require.NoError(t, s.Restart(ctx, services...))
	back := time.Since(killed)
	var res workflows.Result
	require.NoError(t, run.Get(ctx, &res))
	requireOncePG(t, store, runID, n)
	what := strings.Join(services, ", ")
	if len(services) == 0 {
		what = "every server process"
	}
	figure(t, "multi-process cluster, SIGKILL of %s at %d/%d stored, restarted and answering in %.1f s: %d stored once, 0 lost, 0 duplicated", what, atKill, n, back.Seconds(), n)
}

func TestClusterHistoryKilledMidRun(t *testing.T) {
	t.Parallel()
	killMidRun(t, "cluster-history-kill", "history")
}

func TestClusterEveryServerProcessKilledMidRun(t *testing.T) {
	t.Parallel()
	killMidRun(t, "cluster-all-kill")
}
