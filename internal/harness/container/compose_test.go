package container_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
)

// leftOnTheEngine are the containers and rollout networks of run still on
// the engine.
func leftOnTheEngine(t *testing.T, eng *engine.Client, run string) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	cts, err := eng.ListContainers(ctx, container.LabelRun+"="+run)
	require.NoError(t, err)
	for _, c := range cts {
		left = append(left, "container "+c.Labels["evalflow.sandbox"]+" "+c.ID)
	}
	nets, err := eng.ListNetworks(ctx, container.LabelRun+"="+run)
	require.NoError(t, err)
	for _, n := range nets {
		left = append(left, "network "+n.Name)
	}
	return left
}

// A compose task whose service is PostgreSQL, built from Debian's
// packages beside the agent's container: the oracle creates a table
// through the service's name and scores 1, an agent doing nothing 0; the
// tests query the service from the verifier; the services' build output
// is in the first attempt's trace; and nothing of either attempt is left
// on the engine.
func TestComposeTaskWithAServiceScoresAndLeavesNothing(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/compose", "pg-table")
	require.NoError(t, r.Prepare(context.Background(), tk), "the services' images build")

	res, v, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
	require.NoError(t, err, "oracle: harness %+v", res)
	require.Zero(t, res.ExitCode, "oracle: %s %s", res.Stdout, res.Stderr)
	assert.Equal(t, 1.0, v.Reward, "oracle: verifier said %s %s", v.Stdout, v.Stderr)
	assert.Contains(t, v.Stdout, "apple=3,pear=5,plum=7")
	assert.Empty(t, leftOnTheEngine(t, r.Engine, "run-pg-table"), "the oracle's attempt left these")

	res, v, err = attempt(t, r, tk, []string{"true"}, "")
	require.NoError(t, err)
	assert.Zero(t, res.ExitCode)
	assert.Equal(t, 0.0, v.Reward, "nothing done: verifier said %s %s", v.Stdout, v.Stderr)
	assert.Contains(t, v.Stdout, `relation "items" does not exist`, "the tests reached the service")
	assert.Empty(t, leftOnTheEngine(t, r.Engine, "run-pg-table"), "the second attempt left these")
}

// The agent's container reaches its services by name and none of the
// worker host's servers (on any of its addresses, the rollout network's
// gateway among them); nor does a service, which the agent can make run
// what it likes (a database runs what it is sent).
func TestComposeSandboxReachesItsServicesNotTheHost(t *testing.T) {
	var reached atomic.Int64
	var targets []string
	for _, a := range append(hostAddrs(t), "127.0.0.1") {
		ln, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				reached.Add(1)
				c.Close()
			}
		}()
		targets = append(targets, strings.Replace(ln.Addr().String(), ":", "/", 1))
	}
	r := containertest.Runtime(t)
	tk := task(t, "testdata/compose", "pg-table")
	ws, err := r.PrepareWorkspace("", tk)
	require.NoError(t, err)
	defer ws.Remove()
	ctx := context.Background()
	probe := `for t in $TARGETS; do (exec 3<>/dev/tcp/$t) 2>/dev/null && echo "reached $t"; done
gw=$(awk '/^nameserver/ {print $2; exit}' /etc/resolv.conf)
for p in 22 80 5432 7233 8233; do (exec 3<>/dev/tcp/$gw/$p) 2>/dev/null && echo "reached gateway $gw:$p"; done
psql -tAc "SELECT 40 + 2"`
	res, err := r.Run(ctx, harness.Spec{
		Key: "reach-pg/0/0/0", Command: []string{"bash", "-c", probe}, BaseURL: "http://127.0.0.1:9", Task: tk, Workspace: ws,
		Timeout: 2 * time.Minute, Env: []string{"TARGETS=" + strings.Join(targets, " ")},
	})
	require.NoError(t, err)
	assert.Equal(t, "42\n", res.Stdout, "the agent reached the service by its name, and nothing of the host: %s", res.Stderr)

	services, err := r.Engine.ListContainers(ctx, container.LabelRun+"=reach-pg", "evalflow.sandbox=service")
	require.NoError(t, err)
	require.Len(t, services, 1, "the db service runs beside the sandbox")
	var out strings.Builder
	code, err := r.Engine.Exec(ctx, services[0].ID, engine.ExecConfig{Cmd: []string{"bash", "-c", probe}, Env: []string{"TARGETS=" + strings.Join(targets, " "), "PGHOST=127.0.0.1", "PGUSER=evalflow", "PGPASSWORD=evalflow", "PGDATABASE=shop"}}, &out, &out)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "42\n", out.String(), "the service reaches nothing of the host")
	assert.Zero(t, reached.Load(), "a server of the host was reached")
}

// Orphaned services and rollout networks of a worker of this host that
// no longer runs are removed, as its sandboxes are; a live worker's stay.
func TestRemoveOrphanedServicesAndNetworks(t *testing.T) {
	r := containertest.Runtime(t)
	ctx := context.Background()
	host, _ := os.Hostname()
	mk := func(pid string) (network, service string) {
		labels := func(kind string) map[string]string {
			return map[string]string{"evalflow.sandbox": kind, "evalflow.host": host, "evalflow.pid": pid, "evalflow.run": "orphan-services"}
		}
		network = "evalflow-orphan-test-" + pid
		_, err := r.Engine.CreateNetworkWith(ctx, engine.NetworkOptions{Name: network, Labels: labels("rollout-network"), Internal: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Engine.RemoveNetwork(ctx, network) })
		service, err = r.Engine.CreateContainer(ctx, engine.ContainerConfig{
			Image: "docker.io/library/debian:bookworm-slim", Cmd: []string{"sleep", "600"}, Labels: labels("service"),
			HostConfig: engine.HostConfig{NetworkMode: network},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Engine.RemoveContainer(ctx, service) })
		require.NoError(t, r.Engine.StartContainer(ctx, service))
		return network, service
	}
	deadNet, deadSvc := mk("2147483000")
	liveNet, liveSvc := mk(fmt.Sprint(os.Getppid()))
	_, err := r.RemoveOrphans(ctx)
	require.NoError(t, err)
	_, err = r.Engine.InspectContainer(ctx, deadSvc)
	assert.True(t, engine.IsNotFound(err), "the dead worker's service is removed: %v", err)
	_, err = r.Engine.InspectNetwork(ctx, deadNet)
	assert.True(t, engine.IsNotFound(err), "the dead worker's network is removed: %v", err)
	_, err = r.Engine.InspectContainer(ctx, liveSvc)
	assert.NoError(t, err, "a live worker's service stays")
	_, err = r.Engine.InspectNetwork(ctx, liveNet)
	assert.NoError(t, err, "a live worker's network stays")
}

// composeTask writes a task whose environment is the compose file given.
func composeTask(t *testing.T, compose string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, "c", name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("environment/Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n")
	write("environment/docker-compose.yaml", compose)
	write("instruction.md", "Do it.\n")
	write("tests/test.sh", "echo 1 > /logs/verifier/reward.txt\n")
	write("task.toml", "version = \"1.0\"\n")
	return dir
}

// What a sandbox may not have is refused before anything starts, naming
// the compose key: no engine is asked.
func TestComposeRefusesWhatASandboxMayNotHave(t *testing.T) {
	cases := []struct{ name, service, key string }{
		{"gpus", "deploy: {resources: {reservations: {devices: [{driver: nvidia, count: 1, capabilities: [gpu]}]}}}", "deploy.resources.reservations.devices"},
		{"ports", "ports: [\"8080:80\"]", "ports"},
		{"bind", "volumes: [\"/etc:/host-etc\"]", "volumes: /etc"},
		{"relative-bind", "volumes: [\"./data:/data\"]", "volumes: "},
		{"named-volume", "volumes: [\"pgdata:/var/lib/postgresql\"]", "volumes: pgdata"},
		{"privileged", "privileged: true", "privileged"},
		{"network-host", "network_mode: host", "network_mode: host"},
		{"pid-host", "pid: host", "pid: host"},
		{"cap-add", "cap_add: [NET_ADMIN]", "cap_add: NET_ADMIN"},
		{"env-file-outside", "env_file: [/etc/hostname]", "env_file: /etc/hostname"},
		{"build-outside", "build: {context: ../..}", "build.context"},
	}
	r := &container.Runtime{} // no engine: nothing is asked of one
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			compose := "services:\n  db:\n    image: debian:bookworm-slim\n    " + c.service + "\n"
			if c.name == "named-volume" {
				compose += "volumes:\n  pgdata: {}\n"
			}
			tk := task(t, composeTask(t, compose), "c")
			err := r.Prepare(context.Background(), tk)
			var ce *harness.ConfigError
			require.ErrorAs(t, err, &ce, "Prepare(%s) = %v, want a refusal", c.name, err)
			assert.Contains(t, err.Error(), "environment/docker-compose.yaml: service db: "+c.key)
		})
	}
}

// A cycle among depends_on is refused: no service could start first.
func TestComposeRefusesADependencyCycle(t *testing.T) {
	r := &container.Runtime{}
	tk := task(t, composeTask(t, "services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [a]}\n"), "c")
	err := r.Prepare(context.Background(), tk)
	var ce *harness.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "depends_on")
}

// A service that never becomes healthy fails the attempt as the
// runtime's error, before the agent starts, never a score of the
// agent's; nothing of the attempt is left.
func TestComposeServiceNeverHealthyIsTheRuntimes(t *testing.T) {
	r := containertest.Runtime(t)
	dir := composeTask(t, `services:
  sick:
    image: docker.io/library/debian:bookworm-slim
    command: ["sleep", "600"]
    healthcheck: {test: ["CMD", "false"], interval: 200ms, retries: 2}
`)
	tk := task(t, dir, "c")
	tk.ID = "sick-service"
	res, v, err := attempt(t, r, tk, []string{"sh", "-c", "echo started > /app/started"}, "")
	require.Error(t, err, "harness %+v verifier %+v", res, v)
	assert.Contains(t, err.Error(), "service sick of task sick-service never became healthy")
	assert.NotErrorAs(t, err, new(*harness.ConfigError), "not the task's configuration")
	assert.Empty(t, res.Stdout+res.Stderr, "the agent never started")
	assert.Empty(t, leftOnTheEngine(t, r.Engine, "run-sick-service"))
}
