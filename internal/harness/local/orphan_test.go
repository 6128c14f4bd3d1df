//go:build linux

package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Variables that turn this test binary into a worker running one harness:
// which runtime, and the directory it reports to.
const (
	workerRuntimeEnv = "EVALFLOW_TEST_WORKER_RUNTIME"
	workerOutEnv     = "EVALFLOW_TEST_WORKER_OUT"
	workerNetnsEnv   = "EVALFLOW_TEST_WORKER_NETNS"
	workerMarkerEnv  = "EVALFLOW_TEST_WORKER_MARKER"
	workerAgentEnv   = "EVALFLOW_TEST_WORKER_AGENT"
)

// orphanScript is a harness with a child of its own: it records its pid and
// its background child's, then waits.
const orphanScript = `sleep 1000 & echo "$$ $!" > "$OUT/pids.tmp" && mv "$OUT/pids.tmp" "$OUT/pids"; sleep 1000`

// TestWorkerProcess is the worker process of TestHarnessDiesWithWorker; it
// does nothing in a normal run.
func TestWorkerProcess(t *testing.T) {
	out := os.Getenv(workerOutEnv)
	if out == "" {
		return
	}
	local := Runtime{Dir: out}
	spec := shell(orphanScript, "OUT="+out)
	var err error
	switch os.Getenv(workerRuntimeEnv) {
	case "netns":
		n := &Netns{Name: os.Getenv(workerNetnsEnv), Local: local}
		_, err = n.Run(context.Background(), spec)
	case "bwrap":
		// The sandbox sees neither $OUT nor host pids: the processes
		// carry a marker the test finds them by.
		marker := os.Getenv(workerMarkerEnv)
		spec = shell("sleep " + marker + " & sleep " + marker)
		_, err = (&Bwrap{Agent: os.Getenv(workerAgentEnv), Local: local}).Run(context.Background(), spec)
	default:
		_, err = local.Run(context.Background(), spec)
	}
	// Only SIGKILL ends this process in the test; getting here is a failure.
	t.Fatalf("harness returned: %v", err)
}

// TestHarnessDiesWithWorker kills a worker with SIGKILL while its harness
// runs: the harness, its own child and the rest of its process group must
// die too, or they would keep spending a provider's tokens. (A container
// runtime's sandbox is removed by the worker that starts next on the host:
// harness/container and the fault suite test that.)
func TestHarnessDiesWithWorker(t *testing.T) {
	for _, rt := range []string{"local", "netns"} {
		t.Run(rt, func(t *testing.T) {
			out := t.TempDir()
			env := append(os.Environ(), workerRuntimeEnv+"="+rt, workerOutEnv+"="+out)
			switch rt {
			case "netns":
				if os.Geteuid() != 0 {
					t.Skip("network namespaces need root")
				}
				_, err := exec.LookPath("ip")
				require.NoError(t, err, "network namespaces need iproute2 (make setup installs it)")
				// Made here: the worker dies before it could remove it.
				n, err := NewNetns(context.Background(), "10.213.249.0", Runtime{})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, n.Close()) })
				env = append(env, workerNetnsEnv+"="+n.Name)
			}
			worker := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1")
			worker.Env = env
			require.NoError(t, worker.Start())
			t.Cleanup(func() {
				_ = worker.Process.Kill()
				_ = worker.Wait()
			})

			var pids []int
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(filepath.Join(out, "pids"))
				if err != nil {
					return false
				}
				pids = nil
				for _, f := range strings.Fields(string(b)) {
					pid, err := strconv.Atoi(f)
					require.NoError(t, err)
					pids = append(pids, pid)
				}
				return true
			}, 30*time.Second, 10*time.Millisecond, "the harness never started")
			require.Len(t, pids, 2, "harness and child pids")
			pgid := processGroup(t, pids[0])
			// A failing run leaves nothing behind.
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			for _, pid := range pids {
				require.True(t, alive(pid), "process %d is not running yet", pid)
			}

			require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
			_ = worker.Wait()

			for i, what := range []string{"harness", "harness's child"} {
				require.Eventually(t, func() bool { return !alive(pids[i]) }, 10*time.Second, 10*time.Millisecond,
					"the %s (pid %d) outlived its worker", what, pids[i])
			}
			require.Eventually(t, func() bool { return len(groupMembers(pgid)) == 0 }, 10*time.Second, 10*time.Millisecond,
				"process group %d outlived its worker", pgid)
		})
	}
}

// processGroup reads pid's process group from /proc.
func processGroup(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	require.NoError(t, err)
	// After the parenthesised command name: state, ppid, pgrp.
	i := strings.LastIndexByte(string(stat), ')')
	require.Positive(t, i)
	fields := strings.Fields(string(stat[i+1:]))
	require.GreaterOrEqual(t, len(fields), 3)
	pgid, err := strconv.Atoi(fields[2])
	require.NoError(t, err)
	return pgid
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestHarnessSurvivesStartingThread: Pdeathsig fires when the thread that
// forked a harness exits, and Go ends a thread whose locked goroutine
// returns. A harness started from such a goroutine must outlive it.
func TestHarnessSurvivesStartingThread(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = harnessProcAttr(0)
	started := make(chan error, 1)
	var tid int
	start := func() {
		runtime.LockOSThread()
		tid = syscall.Gettid()
		started <- startHarness(cmd)
		// Returning while locked ends this thread.
	}
	go func() {
		// Go never ends the main thread: a goroutine that lands there
		// holds it while the harness starts from another, which can.
		runtime.LockOSThread()
		if syscall.Gettid() != syscall.Getpid() {
			runtime.UnlockOSThread()
			start()
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			start()
		}()
		<-done
		runtime.UnlockOSThread()
	}()
	require.NoError(t, <-started)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join("/proc/self/task", strconv.Itoa(tid)))
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "the locked thread did not exit")
	require.Never(t, func() bool { return !alive(cmd.Process.Pid) }, 300*time.Millisecond, 10*time.Millisecond,
		"the harness died with the thread that started it")
}

// TestBwrapHarnessDiesWithWorker: a sandboxed harness and its children
// die with a worker killed with SIGKILL.
func TestBwrapHarnessDiesWithWorker(t *testing.T) {
	b := needBwrap(t)
	out := t.TempDir()
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1_000_000)
	worker := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1")
	worker.Env = append(os.Environ(), workerRuntimeEnv+"=bwrap", workerOutEnv+"="+out, workerMarkerEnv+"="+marker, workerAgentEnv+"="+b.Agent)
	require.NoError(t, worker.Start())
	t.Cleanup(func() {
		_ = worker.Process.Kill()
		_ = worker.Wait()
		for _, pid := range processesWith(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	require.Eventually(t, func() bool { return len(processesWith(marker)) >= 3 }, 30*time.Second, 10*time.Millisecond,
		"the sandboxed harness never started")

	require.NoError(t, worker.Process.Signal(syscall.SIGKILL))
	_ = worker.Wait()
	require.Eventually(t, func() bool { return len(processesWith(marker)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"sandboxed processes outlived their worker: %v", processesWith(marker))
}
