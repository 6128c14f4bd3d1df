package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/agenttest"
	"github.com/evalflow/evalflow/tasksets"
)

// needBwrap is a bwrap runtime for a test; a machine without bwrap fails
// the test.
func needBwrap(t testing.TB) *Bwrap {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bwrap is not installed: install the bubblewrap package (apt-get install bubblewrap): %v", err)
	}
	return &Bwrap{Agent: agenttest.Agent(t), Local: Runtime{Dir: t.TempDir(), Grace: 100 * time.Millisecond}}
}

// runtime is a runtime under test that also verifies.
type verifyingRuntime interface {
	harness.Runtime
	harness.Verifier
}

// runtimes are the runtimes every workspace test runs on.
func runtimes(t *testing.T) []struct {
	name string
	rt   verifyingRuntime
} {
	return []struct {
		name string
		rt   verifyingRuntime
	}{
		{"local", &Runtime{Dir: t.TempDir(), Grace: 100 * time.Millisecond}},
		{"bwrap", needBwrap(t)},
	}
}

// emptyWorkspace is a workspace with nothing in it, removed with the test.
func emptyWorkspace(t *testing.T) *harness.Workspace {
	t.Helper()
	ws, err := harness.PrepareWorkspace(t.TempDir(), tasksets.Task{ID: "t"}, harness.PrepareOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ws.Remove()) })
	return ws
}

func TestVerifyReward(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		reward  float64
		metrics map[string]float64
		exit    int
	}{
		{"reward.txt", `echo 1 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, 1, map[string]float64{"reward": 1}, 0},
		{"reward.txt with space", `printf ' 0.25 \n\n' > /logs/verifier/reward.txt`, 0.25, map[string]float64{"reward": 0.25}, 0},
		{"reward.json with reward", `echo '{"reward": 0.5, "tests": 3, "note": "x"}' > "$EVALFLOW_VERIFIER_LOGS/reward.json"`,
			0.5, map[string]float64{"reward": 0.5, "tests": 3}, 0},
		{"reward.json mean", `echo '{"a": 1, "b": 0, "c": 0.5}' > "$EVALFLOW_VERIFIER_LOGS/reward.json"`,
			0.5, map[string]float64{"a": 1, "b": 0, "c": 0.5}, 0},
		{"reward.txt wins", `echo 0 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"; echo '{"reward": 1}' > "$EVALFLOW_VERIFIER_LOGS/reward.json"`,
			0, map[string]float64{"reward": 0}, 0},
		{"non-zero exit with a reward", `echo 0 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"; exit 3`, 0, map[string]float64{"reward": 0}, 3},
	}
	for _, r := range runtimes(t) {
		for _, tt := range tests {
			t.Run(r.name+"/"+tt.name, func(t *testing.T) {
				ws := emptyWorkspace(t)
				script := tt.script
				if r.name == "local" {
					script = strings.ReplaceAll(script, "/logs/verifier", "$EVALFLOW_VERIFIER_LOGS")
				}
				got, err := r.rt.Verify(context.Background(), harness.VerifySpec{Key: "k", Workspace: ws, Command: "echo checking; " + script})
				require.NoError(t, err)
				assert.Equal(t, tt.reward, got.Reward)
				assert.Equal(t, tt.metrics, got.Metrics)
				assert.Equal(t, tt.exit, got.ExitCode)
				assert.Equal(t, "checking\n", got.Stdout)
				assert.Positive(t, got.Duration)
			})
		}
	}
}

// TestVerifierEnv: the verifier runs in the workspace with the paths, the
// Dockerfile's ENV and the task's verifier env; never a worker credential.
func TestVerifierEnv(t *testing.T) {
	t.Setenv("EVALFLOW_TEST_API_KEY", "worker-secret")
	tests := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tests, "check.sh"), []byte("echo tests-here\n"), 0o644))
	for _, r := range runtimes(t) {
		t.Run(r.name, func(t *testing.T) {
			ws := emptyWorkspace(t)
			ws.Env = []string{"FROM_DOCKERFILE=yes"}
			got, err := r.rt.Verify(context.Background(), harness.VerifySpec{
				Workspace: ws, Tests: tests, Env: map[string]string{"MODE": "strict"},
				Command: `sh /tests/check.sh; echo "$PWD|$EVALFLOW_WORKSPACE|$EVALFLOW_TESTS|$EVALFLOW_VERIFIER_LOGS|$MODE|$FROM_DOCKERFILE|${EVALFLOW_TEST_API_KEY:-none}"; echo 1 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`,
			})
			require.NoError(t, err)
			want := fmt.Sprintf("tests-here\n%s|%s|%s|%s|strict|yes|none\n", ws.Dir, ws.Dir, tests, filepath.Join(ws.Logs, "verifier"))
			if r.name == "bwrap" {
				want = "tests-here\n/app|/app|/tests|/logs/verifier|strict|yes|none\n"
			}
			assert.Equal(t, want, got.Stdout, got.Stderr)
		})
	}
}

func TestVerifierErrors(t *testing.T) {
	long := strings.Repeat("x", 5000)
	tests := []struct {
		name   string
		script string
		reason string
	}{
		{"no reward", `echo out; echo err >&2`, "wrote no reward"},
		{"crash", `echo out; echo err >&2; exit 2`, "exited with code 2 and wrote no reward"},
		{"not a number", `echo out; echo err >&2; echo abc > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, `reward.txt: "abc" is not a number`},
		{"empty", `echo out; echo err >&2; : > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, `reward.txt: "" is not a number`},
		{"NaN", `echo out; echo err >&2; echo NaN > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, `reward.txt: "NaN" is not a finite number`},
		{"Inf", `echo out; echo err >&2; echo -inf > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, `reward.txt: "-inf" is not a finite number`},
		{"long garbage", `echo out; echo err >&2; echo ` + long + ` > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, `reward.txt: "xxxxxxxxxxxxxxxxxxxxxxxx"… is not a number`},
		{"json of non-numbers", `echo out; echo err >&2; echo '{"a": "1", "b": true}' > "$EVALFLOW_VERIFIER_LOGS/reward.json"`, "reward.json: holds no numbers"},
		{"json reward not a number", `echo out; echo err >&2; echo '{"reward": "1", "b": 1}' > "$EVALFLOW_VERIFIER_LOGS/reward.json"`, `reward.json: "reward" is not a number`},
		{"json array", `echo out; echo err >&2; echo '[1]' > "$EVALFLOW_VERIFIER_LOGS/reward.json"`, "reward.json: not a JSON object of named numbers"},
		{"a link", `echo out; echo err >&2; ln -s /etc/hostname "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, "reward.txt: is a symbolic link"},
	}
	for _, r := range runtimes(t) {
		for _, tt := range tests {
			t.Run(r.name+"/"+tt.name, func(t *testing.T) {
				_, err := r.rt.Verify(context.Background(), harness.VerifySpec{Workspace: emptyWorkspace(t), Command: tt.script})
				var ve *harness.VerifierError
				require.ErrorAs(t, err, &ve, "Verify(%q)", tt.script)
				assert.Equal(t, tt.reason, ve.Reason)
				assert.Less(t, len(ve.Error()), 100, "the reason is a short line")
				assert.Equal(t, "out\n", ve.Stdout)
				assert.Equal(t, "err\n", ve.Stderr)
			})
		}
	}
}

// TestVerifierIgnoresAgentReward: a reward the agent wrote into
// /logs/verifier before the verifier ran does not count.
func TestVerifierIgnoresAgentReward(t *testing.T) {
	for _, r := range runtimes(t) {
		t.Run(r.name, func(t *testing.T) {
			ws := emptyWorkspace(t)
			res, err := r.rt.Run(context.Background(), harness.Spec{Key: "k", Workspace: ws,
				Command: []string{"sh", "-c", `echo 1 > "$EVALFLOW_LOGS/verifier/reward.txt"`}})
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, res.Stderr)
			require.FileExists(t, filepath.Join(ws.Logs, "verifier", "reward.txt"))
			_, err = r.rt.Verify(context.Background(), harness.VerifySpec{Workspace: ws, Command: "true"})
			var ve *harness.VerifierError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "wrote no reward", ve.Reason)
		})
	}
}

// TestVerifierTimeoutKillsItsProcesses: a verifier that hangs is killed at
// its timeout, its children too, and that is a *harness.VerifierError.
func TestVerifierTimeoutKillsItsProcesses(t *testing.T) {
	for _, r := range runtimes(t) {
		t.Run(r.name, func(t *testing.T) {
			marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1_000_000)
			start := time.Now()
			_, err := r.rt.Verify(context.Background(), harness.VerifySpec{
				Workspace: emptyWorkspace(t), Timeout: time.Second,
				Command: fmt.Sprintf(`echo started; (trap '' TERM; exec sleep %s) & sleep %s; echo 1 > "$EVALFLOW_VERIFIER_LOGS/reward.txt"`, marker, marker),
			})
			var ve *harness.VerifierError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "timed out after 1s", ve.Reason)
			assert.Equal(t, "started\n", ve.Stdout)
			assert.Less(t, time.Since(start), 30*time.Second)
			require.Eventually(t, func() bool { return len(processesWith(marker)) == 0 }, 10*time.Second, 10*time.Millisecond,
				"the verifier's processes outlived its timeout: %v", processesWith(marker))
		})
	}
}

// processesWith lists the live processes whose command line holds s.
func processesWith(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), s) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestVerifySpecErrors(t *testing.T) {
	for _, r := range runtimes(t) {
		_, err := r.rt.Verify(context.Background(), harness.VerifySpec{Command: "true"})
		assert.ErrorContains(t, err, "no workspace", r.name)
		_, err = r.rt.Verify(context.Background(), harness.VerifySpec{Workspace: emptyWorkspace(t)})
		assert.ErrorContains(t, err, "no command", r.name)
		var ve *harness.VerifierError
		assert.False(t, errors.As(err, &ve), "a bad spec is not the verifier's fault")
	}
}

// TestLocalRunInWorkspace: with a workspace the harness works in it, its
// task and answer files live outside it, and it stays for the verifier.
func TestLocalRunInWorkspace(t *testing.T) {
	ctx := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ctx, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ctx, "src", "main.sh"), []byte("echo main\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte("FROM x\nENV GREETING=hi\nWORKDIR /app/src\nCOPY src/ ./\n"), 0o644))
	ws, err := harness.PrepareWorkspace(t.TempDir(), tasksets.Task{ID: "t", Environment: ctx}, harness.PrepareOptions{})
	require.NoError(t, err)
	defer ws.Remove()
	solution := t.TempDir()
	spec := shell(`echo "$PWD|$EVALFLOW_WORKDIR|$EVALFLOW_WORKSPACE|$EVALFLOW_LOGS|$EVALFLOW_SOLUTION|$GREETING"; ` +
		`cat "$EVALFLOW_TASK_FILE" > /dev/null && echo made > made.txt && echo 42 > "$EVALFLOW_ANSWER_FILE"; dirname "$EVALFLOW_TASK_FILE"`)
	spec.Workspace, spec.Solution = ws, solution

	res, err := (&Runtime{Dir: t.TempDir()}).Run(context.Background(), spec)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	require.Len(t, lines, 2)
	work := filepath.Join(ws.Dir, "src")
	assert.Equal(t, strings.Join([]string{work, work, ws.Dir, ws.Logs, solution, "hi"}, "|"), lines[0])
	assert.False(t, within(ws.Dir, lines[1]), "task files (%s) are outside the workspace", lines[1])
	assert.NoDirExists(t, lines[1], "the run's own files are removed")
	assert.Equal(t, "42", res.Answer)
	assert.FileExists(t, filepath.Join(work, "made.txt"), "the workspace stays for the verifier")
	assert.FileExists(t, filepath.Join(work, "main.sh"))
}

// TestBwrapSandbox: what a harness sees in a bwrap sandbox.
func TestBwrapSandbox(t *testing.T) {
	b := needBwrap(t)
	hostTmp := filepath.Join(os.TempDir(), fmt.Sprintf("evalflow-host-marker-%d", time.Now().UnixNano()))
	require.NoError(t, os.WriteFile(hostTmp, nil, 0o644))
	defer os.Remove(hostTmp)
	ws := emptyWorkspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws.Dir, "given.txt"), []byte("given\n"), 0o644))
	ws.Env = []string{"FROM_DOCKERFILE=yes"}

	script := `set -e
echo "pwd=$PWD workdir=$EVALFLOW_WORKDIR ws=$EVALFLOW_WORKSPACE logs=$EVALFLOW_LOGS home=$HOME env=$FROM_DOCKERFILE"
echo "task=$EVALFLOW_TASK_FILE"
grep -q '"id":"t-1"' "$EVALFLOW_TASK_FILE"
cat given.txt
echo made > made.txt
echo log > /logs/agent/log.txt
test ! -e ` + hostTmp + ` && echo "host tmp hidden"
test -z "$(ls -A "$HOME")" && echo "home is fresh"
touch "$HOME/.rc" /tmp/scratch
echo "pid=$$"
touch /usr/evalflow-probe 2>/dev/null || echo "system read-only"
echo 7 > "$EVALFLOW_ANSWER_FILE"`
	spec := shell(script)
	spec.Workspace = ws
	res, err := b.Run(context.Background(), spec)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	home := os.Getenv("HOME")
	if !filepath.IsAbs(home) || home == "/" {
		home = "/root"
	}
	assert.True(t, strings.HasPrefix(res.Stdout, "pwd=/app workdir=/app ws=/app logs=/logs home="+home+" env=yes\n"+
		"task=/run/evalflow/task.json\ngiven\nhost tmp hidden\nhome is fresh\n"), "the harness saw:\n%s", res.Stdout)
	assert.Contains(t, res.Stdout, "system read-only")
	assert.NotContains(t, res.Stdout, "pid=1\n")
	assert.Regexp(t, `pid=\d\n`, res.Stdout, "the sandbox has its own pids")
	assert.Equal(t, "7", res.Answer)
	assert.FileExists(t, filepath.Join(ws.Dir, "made.txt"))
	assert.FileExists(t, filepath.Join(ws.Logs, "agent", "log.txt"))
	assert.NoFileExists(t, "/usr/evalflow-probe")
}

// TestBwrapHidesTestsAndSolution: an agent that looks for the tests and
// the solution does not find them (the oracle's /solution aside); the
// verifier finds /tests.
func TestBwrapHidesTestsAndSolution(t *testing.T) {
	b := needBwrap(t)
	root := t.TempDir()
	tests, solution := filepath.Join(root, "tests"), filepath.Join(root, "solution")
	require.NoError(t, os.MkdirAll(tests, 0o755))
	require.NoError(t, os.MkdirAll(solution, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tests, "test.sh"), []byte("echo 1 > /logs/verifier/reward.txt\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(solution, "solve.sh"), []byte("echo solved\n"), 0o644))
	ws := emptyWorkspace(t)

	look := func(path string) string {
		return fmt.Sprintf(`if cat %s 2>/dev/null; then echo "read %s"; else echo "no %s"; fi; `, path, path, path)
	}
	agent := look("/tests/test.sh") + look("/solution/solve.sh") + look(filepath.Join(tests, "test.sh")) + look(filepath.Join(solution, "solve.sh"))
	res, err := b.Run(context.Background(), harness.Spec{Key: "k", Workspace: ws, Command: []string{"sh", "-c", agent}})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("no /tests/test.sh\nno /solution/solve.sh\nno %s/test.sh\nno %s/solve.sh\n", tests, solution), res.Stdout)

	res, err = b.Run(context.Background(), harness.Spec{Key: "k", Workspace: ws, Solution: solution, Command: []string{"sh", "-c", agent + `echo "$EVALFLOW_SOLUTION"`}})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("no /tests/test.sh\necho solved\nread /solution/solve.sh\nno %s/test.sh\nno %s/solve.sh\n/solution\n", tests, solution), res.Stdout,
		"the oracle sees /solution, still no tests")

	got, err := b.Verify(context.Background(), harness.VerifySpec{Workspace: ws, Tests: tests, Command: "test ! -e /solution && bash /tests/test.sh"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, got.Reward)
}

// TestBwrapNetwork: a sandbox has a network namespace of its own whose
// one way out is the forwarder to the interception: a server on the
// host's loopback is not reached, the interception is. IsolateNet leaves
// out the forwarder (a tunnel's job); HostNet shares the host's network.
func TestBwrapNetwork(t *testing.T) {
	serve := func() (addr string, hits *atomic.Int64) {
		hits = new(atomic.Int64)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				fmt.Fprint(c, "hello from the host\n")
				c.Close()
			}
		}()
		return ln.Addr().String(), hits
	}
	other, otherHits := serve()
	icpt, icptHits := serve()
	// Each harness tries the other server, then the interception.
	script := `try() { (exec 3<>/dev/tcp/${1%:*}/${1##*:} && head -1 <&3) 2>/dev/null || echo refused; }
try "$0"; h=${EVALFLOW_BASE_URL#http://}; try "${h%%/*}"`
	tests := []struct {
		name             string
		isolate, hostNet bool
		want             string
		remote           bool
	}{
		{"default", false, false, "refused\nhello from the host\n", false},
		{"isolated", true, false, "refused\nrefused\n", true},
		{"host network", false, true, "hello from the host\nhello from the host\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := needBwrap(t)
			b.IsolateNet, b.HostNet = tt.isolate, tt.hostNet
			assert.Equal(t, tt.remote, harness.IsRemote(b))
			o, i := otherHits.Load(), icptHits.Load()
			res, err := b.Run(context.Background(), harness.Spec{Key: "k", BaseURL: "http://" + icpt,
				Command: []string{"bash", "-c", script, other}})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Stdout, res.Stderr)
			assert.Equal(t, tt.hostNet, otherHits.Load() > o, "the host's loopback server reached")
			assert.Equal(t, !tt.isolate, icptHits.Load() > i, "the interception reached")
		})
	}

	// A verifier has no way out at all.
	b := needBwrap(t)
	ws, err := harness.PrepareWorkspace(b.Local.Dir, tasksets.Task{ID: "net"}, harness.PrepareOptions{})
	require.NoError(t, err)
	defer ws.Remove()
	o := otherHits.Load()
	host, port, _ := net.SplitHostPort(other)
	v, err := b.Verify(context.Background(), harness.VerifySpec{Workspace: ws, Command: fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/%s/%s' 2>/dev/null; echo 1 > $EVALFLOW_VERIFIER_LOGS/reward.txt", host, port)})
	require.NoError(t, err)
	assert.Equal(t, 1.0, v.Reward)
	assert.Equal(t, o, otherHits.Load(), "the verifier reached the host's loopback")
}

// TestBwrapHarnessProgram: the harness program is reachable inside: a
// path is bound as a file, a program on PATH outside the system
// directories with its directory; a missing one is exec.ErrNotFound.
func TestBwrapHarnessProgram(t *testing.T) {
	b := needBwrap(t)
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "evalflow-test-agent"), []byte("#!/bin/sh\necho agent ran in $PWD\nevalflow-test-helper\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "evalflow-test-helper"), []byte("#!/bin/sh\necho helper ran\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	tests := []struct {
		command string
		want    string
	}{
		{"evalflow-test-agent", "agent ran in /app\nhelper ran\n"},
		{filepath.Join(bin, "evalflow-test-helper"), "helper ran\n"},
	}
	for _, tt := range tests {
		res, err := b.Run(context.Background(), harness.Spec{Key: "k", Command: []string{tt.command}})
		require.NoError(t, err, tt.command)
		assert.Equal(t, tt.want, res.Stdout, "%s: %s", tt.command, res.Stderr)
	}
	// A file given by path binds that file only.
	res, err := b.Run(context.Background(), harness.Spec{Key: "k", Command: []string{filepath.Join(bin, "evalflow-test-agent")}})
	require.NoError(t, err)
	assert.Contains(t, res.Stderr, "evalflow-test-helper: not found")

	_, err = b.Run(context.Background(), harness.Spec{Key: "k", Command: []string{"evalflow-no-such-program"}})
	assert.ErrorIs(t, err, exec.ErrNotFound)
	entries, err := os.ReadDir(b.Local.Dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing left behind")
}

func TestHostTests(t *testing.T) {
	tests := []struct{ in, want string }{
		{"bash /tests/test.sh", "bash /x/t/test.sh"},
		{"cd /tests && ./run", "cd /x/t && ./run"},
		{`sh "/tests/a b.sh"`, `sh "/x/t/a b.sh"`},
		{"bash /app/tests/test.sh /testsuite", "bash /app/tests/test.sh /testsuite"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, hostTests(tt.in, "/x/t"), "hostTests(%q)", tt.in)
	}
}
