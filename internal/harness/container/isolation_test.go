package container_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
	"github.com/evalflow/evalflow/tasksets"
)

// The agent is an adversary: these harnesses try to get the reward
// without doing the task, and to reach what they can from the sandbox.

// Harnesses that tamper with the verifier rather than do the task.
var tampering = map[string]string{
	// Tests rewritten as soon as they are copied in (and planted before).
	"rewrites the tests": `mkdir -p /tests; printf '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n' > /tests/test.sh
nohup bash -c 'for i in $(seq 6000); do for f in /tests/*.sh /tests/*.py; do [ -f "$f" ] && case "$f" in *.sh) printf "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n" > "$f";; *.py) printf "def test_ok():\n    pass\n" > "$f";; esac; done; sleep 0.01; done' >/dev/null 2>&1 &`,
	// A process that keeps writing a reward, where the verifier writes.
	"leaves a reward writer": `nohup bash -c 'for i in $(seq 60000); do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; echo "{\"reward\": 1}" > /logs/verifier/reward.json; sleep 0.005; done' >/dev/null 2>&1 &`,
	// pytest hooks wherever pytest might look for them: /tests (made
	// before the tests arrive), the workdir and the root.
	"plants a conftest.py": `hook='import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'
mkdir -p /tests; for d in /tests /app /; do printf '%s' "$hook" > "$d/conftest.py"; done`,
}

// Every tampering harness scores 0 where the oracle scores 1, for a shell
// verifier and for a pytest one.
func TestTamperingScoresZero(t *testing.T) {
	r := containertest.Runtime(t)
	for _, name := range []string{"answer-42", "pytest-42"} {
		t.Run(name, func(t *testing.T) {
			tk := task(t, "testdata/isolation", name)
			_, v, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
			require.NoError(t, err)
			assert.Equal(t, 1.0, v.Reward, "oracle: %s %s", v.Stdout, v.Stderr)
			for what, script := range tampering {
				res, v, err := attempt(t, r, tk, []string{"bash", "-c", script}, "")
				require.NoError(t, err, what)
				require.Zero(t, res.ExitCode, "%s: %s", what, res.Stderr)
				assert.Equal(t, 0.0, v.Reward, "a harness that %s got the reward: %s %s", what, v.Stdout, v.Stderr)
				if what == "plants a conftest.py" {
					assert.Equal(t, []string{"/conftest.py"}, v.RemovedHooks, "the hook above the tests is removed, the workdir's is the agent's work")
				}
			}
		})
	}
}

// Three rollouts at once of a task whose solution leaves sshd and nginx
// on their fixed ports each score 1: every sandbox has ports of its own,
// and its verifier sees its services.
func TestServicesOnFixedPortsThreeAtOnce(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/isolation", "services")
	require.NoError(t, r.Prepare(context.Background(), tk))
	type scored struct {
		v   harness.VerifyResult
		err error
	}
	out := make(chan scored, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, v, err := tryAttempt(r, tk, harness.OracleCommand(), tk.Solution)
			out <- scored{v, err}
		}()
	}
	wg.Wait()
	close(out)
	for s := range out {
		require.NoError(t, s.err)
		assert.Equal(t, 1.0, s.v.Reward, "verifier said %s %s", s.v.Stdout, s.v.Stderr)
	}
}

// probe tries every address:port of targets (space-separated) and the
// sandbox's gateway at gatewayPorts, writes what answered to
// /app/reached.txt (empty: nothing did), then makes one call to the
// interception at its URL.
const probe = `reach() { timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null && echo "$1:$2"; }
: > /app/reached.txt
for t in $TARGETS; do reach "${t%:*}" "${t##*:}" >> /app/reached.txt; done
gw=$(awk '$2 == "00000000" { print $3; exit }' /proc/net/route)
if [ -n "$gw" ]; then
	gw=$(printf '%d.%d.%d.%d' 0x${gw:6:2} 0x${gw:4:2} 0x${gw:2:2} 0x${gw:0:2})
	echo "gateway $gw" > /app/gateway.txt
	for p in $GATEWAY_PORTS; do reach "$gw" "$p" >> /app/reached.txt; done
fi
for s in /run/podman/podman.sock /var/run/docker.sock /run/docker.sock; do [ -S "$s" ] && echo "$s" >> /app/reached.txt; done
host=${EVALFLOW_BASE_URL#http://}; port=${host##*:}
exec 3<>/dev/tcp/127.0.0.1/$port
printf 'GET / HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n' "$OPENAI_API_KEY" >&3
cat <&3 | tail -1`

// A probe in a sandbox reaches none of the worker host's services (the
// Temporal frontend's gRPC and HTTP ports, the UI, the viewer, the pull
// API, the gateway, the metrics, PostgreSQL, another rollout's
// interception, a server on the host's other addresses, another sandbox's
// services, the engine's socket) and still makes its model calls, whether
// or not its task allows the internet.
func TestSandboxReachesNothingOfTheHost(t *testing.T) {
	var reached atomic.Int64
	count := func(ln net.Listener) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				reached.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	// Servers of the worker's host: on loopback (another rollout's
	// interception stands for every such service), and on its other
	// addresses (a service bound to all of them).
	loop, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	count(loop)
	targets := []string{loop.Addr().String()}
	for _, port := range []int{7233, 7243, 8233, 8234, 8470, 8790, 9464, 5432} {
		targets = append(targets, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, a := range hostAddrs(t) {
		ln, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
		require.NoError(t, err)
		count(ln)
		targets = append(targets, ln.Addr().String())
	}
	icptSrv, icpt := interception(t)

	ctx := context.Background()
	dir := t.TempDir()
	// Podman's user-mode network, and the engine's bridge other engines
	// use: the same probe for each.
	for _, network := range []string{container.Slirp, container.DefaultBridge} {
		t.Run(network, func(t *testing.T) {
			r := containertest.Runtime(t)
			r.Network = network
			targets := slices.Clone(targets)
			// Another rollout's sandbox, its services left running.
			services := task(t, "testdata/isolation", "services")
			other, err := r.PrepareWorkspace("", services)
			require.NoError(t, err)
			defer other.Remove()
			res, err := r.Run(ctx, harness.Spec{Key: "other/0/0/0", Command: harness.OracleCommand(), BaseURL: icptSrv.URL, Task: services, Workspace: other, Timeout: 2 * time.Minute, Solution: services.Solution})
			require.NoError(t, err)
			require.Zero(t, res.ExitCode, res.Stderr)
			list, err := r.Engine.ListContainers(ctx, container.LabelRun+"=other")
			require.NoError(t, err)
			require.Len(t, list, 1)
			ct, err := r.Engine.InspectContainer(ctx, list[0].ID)
			require.NoError(t, err)
			addressed := false
			for _, n := range ct.NetworkSettings.Networks {
				if n.IPAddress != "" {
					targets = append(targets, n.IPAddress+":80", n.IPAddress+":22")
					addressed = true
				}
			}
			// On slirp4netns no sandbox has an address another could try.
			assert.Equal(t, network == container.DefaultBridge, addressed, "the other sandbox's address on %s", network)
			for _, internet := range []bool{true, false} {
				t.Run(fmt.Sprintf("internet=%v", internet), func(t *testing.T) {
					tk := probeTask(t, dir, internet)
					ws, err := r.PrepareWorkspace("", tk)
					require.NoError(t, err)
					defer ws.Remove()
					before := icpt.Load()
					res, err := r.Run(ctx, harness.Spec{
						Key: "probe/0/0/0", Command: []string{"bash", "-c", probe}, BaseURL: icptSrv.URL, Secret: "s3cret", Task: tk, Workspace: ws, Timeout: 2 * time.Minute,
						Env: []string{"TARGETS=" + strings.Join(targets, " "), "GATEWAY_PORTS=22 80 5432 7233 7243 8233 8234 8470 8790 9464"},
					})
					require.NoError(t, err)
					require.Zero(t, res.ExitCode, res.Stderr)
					assert.Equal(t, "model says hi to Bearer s3cret", res.Stdout, "the model call went through the interception")
					assert.Equal(t, before+1, icpt.Load())
					v, err := r.Verify(ctx, harness.VerifySpec{Key: "probe", Workspace: ws, Tests: tk.Tests, Command: tk.Verify, Timeout: time.Minute})
					require.NoError(t, err)
					assert.Equal(t, "reached: \n", v.Stdout, "the sandbox reached these (%s)", strings.TrimSpace(v.Stderr))
					if internet {
						assert.Contains(t, v.Stderr, "gateway ", "a sandbox allowed the internet has a route out")
					}
					assert.Zero(t, reached.Load(), "a server of the host was reached from the sandbox")
				})
			}
		})
	}
}

// A task with allow_internet = false: the sandbox reaches no server of the
// host but the interception, and a harness still talks to the latter.
func TestNoInternetReachesOnlyTheInterception(t *testing.T) {
	var other atomic.Int64
	otherSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { other.Add(1) }))
	defer otherSrv.Close()
	icptSrv, icpt := interception(t)
	_, otherPort, _ := net.SplitHostPort(otherSrv.Listener.Addr().String())

	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, "offline", name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
	}
	write("environment/Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n", 0o644)
	write("instruction.md", "Work offline.\n", 0o644)
	write("task.toml", "version = \"1.0\"\n[environment]\nallow_internet = false\n", 0o644)
	write("tests/test.sh", "#!/bin/bash\ncat /app/net.txt\n[ -s /app/model.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n", 0o755)
	tk := task(t, dir, "offline")

	r := containertest.Runtime(t)
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	// bash's /dev/tcp stands in for any client: the other server is tried
	// at its loopback address, the interception at its URL.
	script := `host=${EVALFLOW_BASE_URL#http://}; port=${host##*:}
if (exec 3<>/dev/tcp/127.0.0.1/` + otherPort + `) 2>/dev/null; then echo reached > /app/net.txt; else echo isolated > /app/net.txt; fi
exec 3<>/dev/tcp/127.0.0.1/$port
printf 'GET / HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n' "$OPENAI_API_KEY" >&3
cat <&3 > /app/model.txt
tail -1 /app/model.txt`
	ctx := context.Background()
	res, err := r.Run(ctx, harness.Spec{Key: "offline/0/0/0", Command: []string{"bash", "-c", script}, BaseURL: icptSrv.URL, Secret: "s3cret", Task: tk, Workspace: ws, Timeout: time.Minute})
	require.NoError(t, err)
	require.Zero(t, res.ExitCode, res.Stderr)
	assert.Equal(t, "model says hi to Bearer s3cret", res.Stdout)
	v, err := r.Verify(ctx, harness.VerifySpec{Key: "offline", Workspace: ws, Tests: tk.Tests, Command: tk.Verify, Timeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 1.0, v.Reward)
	assert.Equal(t, "isolated\n", v.Stdout)
	assert.Zero(t, other.Load(), "the sandbox reached a server of the host other than the interception")
	assert.Equal(t, int64(1), icpt.Load())
}

// interception stands in for a rollout's interception server: it answers
// "model says hi to" and the call's Authorization, and counts the calls.
func interception(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	calls := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprintf(w, "model says hi to %s", r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

// probeTask is a task whose tests print what the probe reached.
func probeTask(t *testing.T, dir string, internet bool) tasksets.Task {
	t.Helper()
	name := fmt.Sprintf("probe-%v", internet)
	write := func(file, content string, mode os.FileMode) {
		p := filepath.Join(dir, name, file)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
	}
	write("environment/Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n", 0o644)
	write("instruction.md", "Probe.\n", 0o644)
	write("task.toml", fmt.Sprintf("version = \"1.0\"\n[environment]\nallow_internet = %v\n", internet), 0o644)
	write("tests/test.sh", "#!/bin/bash\necho \"reached: $(tr '\\n' ' ' < /app/reached.txt)\"\ncat /app/gateway.txt >&2\necho 1 > /logs/verifier/reward.txt\n", 0o755)
	return task(t, dir, name)
}

// hostAddrs are this host's IPv4 addresses other than loopback.
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			out = append(out, ipn.IP.String())
		}
	}
	require.NotEmpty(t, out, "this host has an address besides loopback")
	return out
}

// A test runner's hooks that the agent planted outside its workdir are
// removed before grading; its workdir's files, what it deleted and what it
// left in /tests (hidden by the task's tests) are not.
func TestPlantedHooks(t *testing.T) {
	changes := []engine.Change{
		{Path: "/conftest.py", Kind: 1},
		{Path: "/pytest.ini", Kind: 1},
		{Path: "/pyproject.toml", Kind: 0},
		{Path: "/srv/pyproject.toml", Kind: 1},
		{Path: "/app/conftest.py", Kind: 1},
		{Path: "/app/pyproject.toml", Kind: 1},
		{Path: "/app/repo/tox.ini", Kind: 1},
		{Path: "/tests/conftest.py", Kind: 1},
		{Path: "/usr/lib/python3/dist-packages/sitecustomize.py", Kind: 1},
		{Path: "/root/.local/lib/python3.11/site-packages/conftest.py", Kind: 1},
		{Path: "/setup.cfg", Kind: 2},
		{Path: "/etc/hosts", Kind: 0},
	}
	got := container.PlantedHooks(changes, "/app/repo")
	assert.Equal(t, []string{
		"/conftest.py", "/pytest.ini", "/pyproject.toml", "/app/conftest.py", "/app/pyproject.toml",
		"/usr/lib/python3/dist-packages/sitecustomize.py", "/root/.local/lib/python3.11/site-packages/conftest.py",
	}, got)
}

// A task with environment_mode = "separate" is graded in a fresh sandbox
// of the verifier's image fed only its artifacts: the oracle's answer
// scores, what else it left is not there, and no tampering reaches it.
func TestSeparateVerifier(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/isolation", "separate")
	_, v, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
	require.NoError(t, err)
	assert.Equal(t, 1.0, v.Reward, "oracle: %s %s", v.Stdout, v.Stderr)
	assert.Equal(t, "image=verifier scratch=no note=kept\n", v.Stdout, "the verifier's image, the artifacts and /logs/artifacts only")

	_, v, err = attempt(t, r, tk, []string{"true"}, "")
	require.NoError(t, err)
	assert.Equal(t, 0.0, v.Reward, "nothing done")
	for what, script := range tampering {
		_, v, err := attempt(t, r, tk, []string{"bash", "-c", script}, "")
		require.NoError(t, err, what)
		assert.Equal(t, 0.0, v.Reward, "a harness that %s got the reward: %s %s", what, v.Stdout, v.Stderr)
	}
}
