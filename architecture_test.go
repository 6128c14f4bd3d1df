package evalflow_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/evalflow/evalflow/"

// allowed is the import graph of ARCHITECTURE.md: for each package of the
// module, the module's packages it may import. Imports point downward; a
// package missing here fails the test until it is placed in the design.
var allowed = map[string][]string{
	"rollout": {},
	"arith":   {},
	// JSON as it crosses the wire: shape checks, the decode, the overlay.
	"internal/jsonwire": {},
	// How the chat templates of the model families token-in bridges close a turn.
	"internal/chattemplate": {},
	// A vLLM-shaped upstream of a family's real template and tokenizer
	// (a Node.js server), for tests.
	"internal/chattemplate/vllmtest": {"internal/chattemplate", "internal/logtest"},
	"tunnel":                         {},
	"internal/devserver":             {"internal/namespace", "rollout", "workflows"},
	// The embedded server started for a test, on free ports, and a client.
	"internal/devserver/devtest": {"internal/devserver", "internal/namespace"},
	// A namespace made ready for evalflow: the namespace, its search attributes.
	"internal/namespace": {"rollout", "workflows"},
	// A certificate authority of a test's own.
	"internal/testca": {},
	// A log a test reads while the code under test writes it.
	"internal/logtest": {},
	// A git repository of a test's own, as registry tasks name theirs.
	"internal/gittest": {},
	// The built-in agent built static, for the tests of the sandboxes.
	"internal/agenttest": {},
	// The real Temporal server as service processes, for tests.
	"internal/temporalcluster": {"internal/devserver", "internal/results/postgres/pgtest", "internal/testca", "internal/wiring"},
	// Prometheus collectors; a nil *Metrics records nothing.
	"internal/metrics": {},
	"dialects":         {"internal/jsonwire"},
	"trace":            {"dialects"},
	// A rollout's turns as a trainer learns from them: steps, masks, the
	// exact-prefix check, samples.
	"trajectory": {"dialects", "rollout", "trace"},
	"tasksets":   {"arith"},
	"rubrics":    {"tasksets", "arith"},
	// The harness contract: runtimes, specs, results, workspaces,
	// verifiers, the env contract; a workspace from a Dockerfile's subset.
	"harness": {"internal/harness/dockerfile", "tasksets"},
	// The subset of a Dockerfile carried out without a container engine.
	"internal/harness/dockerfile": {"tasksets"},
	// What keeps a task from running on this host's files.
	"internal/harness/hostpaths": {"harness", "internal/harness/dockerfile", "tasksets"},
	// The runtimes on this host's files: subprocesses, netns, bwrap (whose
	// forwarder is the keeper's).
	"internal/harness/local": {"harness", "internal/harness/container/keeper", "internal/harness/hostpaths", "tasksets"},
	// The default runtime, one per task: a container, bwrap, or local.
	"internal/harness/auto": {"harness", "internal/harness/local", "tasksets"},
	// The built-in agent is a program of its own: it knows the task format
	// and the arithmetic of its tool, nothing of the worker.
	"internal/harness/agent": {"arith", "internal/harness/container/keeper", "tasksets"},
	// Packaged harnesses (codex, claude-code) wrap a runtime: installed
	// from npm, configured for the slot, run like any harness.
	"internal/harness/packaged": {"harness", "tasksets"},
	"providers":                 {"dialects"},
	// What model calls cost: the bundled price table and a call's cost.
	"internal/prices": {"dialects"},
	"providers/mock":  {"dialects", "arith"},
	// The mock model served to a test over HTTP.
	"providers/mock/mocktest": {"providers/mock"},
	"interception":            {"dialects", "interception/gateway", "interception/sidecar", "internal/chattemplate", "internal/metrics", "internal/prices", "trace", "tunnel"},
	"results":                 {"rollout", "trace"},
	// The PostgreSQL run store, the contract suite both stores pass, a
	// test database of its own per test, and the flat export of a run.
	"results/postgres":                 {"results", "rollout", "trace"},
	"internal/results/postgres/pgtest": {},
	"results/storetest":                {"results", "rollout", "trace"},
	"results/export":                   {"results", "trace", "trajectory"},
	// A run's rollouts as ATIF trajectories (Harbor's format), and as a
	// chat-messages dataset for supervised fine-tuning.
	"results/export/atif": {"dialects", "results", "trace"},
	"results/export/sft":  {"dialects", "results", "rollout", "trace"},
	// Workflows and the pull client know the contract and the data it
	// carries only: no transport, tunnel or subprocess is linked into a
	// trainer or a workflow worker through them.
	"workflows": {"rollout"},
	"pull":      {"workflows", "rollout", "trace", "trajectory"},
	// The pull API over HTTP, for trainers outside Go: a handler over the
	// pull client. pull itself links no HTTP server.
	"pull/pullhttp": {"pull", "workflows", "rollout", "trajectory"},
	"activities": {"rollout", "dialects", "harness", "interception", "interception/sidecar", "internal/metrics", "internal/prices", "providers", "results",
		"rubrics", "tasksets", "tasksets/tables", "trace", "tunnel"},
	// The rollout gateway and the side routes (/state, /task, /user) are
	// handlers of their own, over small interfaces the proxy satisfies:
	// interception composes them.
	"interception/gateway": {"dialects", "trace", "trajectory"},
	"interception/sidecar": {"dialects", "trace"},

	// Tasksets backed by tables (CSV, Parquet, Arrow): their readers stay
	// out of what links tasksets for its types only (the built-in agent).
	"tasksets/tables": {"tasksets"},
	// A run's life: started, attached to, resumed, its status read from
	// Temporal or the store. No worker, no Temporal server: the viewer
	// links it.
	"run": {"results", "rollout", "workflows"},
	// The run viewer reads the store, and the run's summaries as workflows
	// write them.
	"internal/viewer": {"internal/audit", "results", "rollout", "run", "workflows"},
	// What an audit's sweep found, for the starter and the viewer.
	"internal/audit": {"results", "rollout", "workflows"},
	// Drives a headless Chromium for the viewer's browser tests.
	"internal/viewer/viewertest": {},
	// The Docker Engine API client, and a test engine that fails a test
	// when it does not answer.
	"internal/engine":            {},
	"internal/engine/enginetest": {"internal/engine"},
	// The container runtime, its keeper (linked into the built-in agent,
	// so the standard library only), and its test set-up.
	"internal/harness/container":               {"internal/engine", "harness", "internal/harness/container/keeper", "tasksets"},
	"internal/harness/container/keeper":        {},
	"internal/harness/container/containertest": {"internal/agenttest", "internal/engine", "internal/engine/enginetest", "harness", "internal/harness/container", "internal/harness/container/keeper", "tasksets"},
	"internal/wiring": {"activities", "dialects", "internal/engine", "harness", "internal/harness/agent", "internal/harness/auto", "internal/harness/container", "internal/harness/container/keeper", "internal/harness/local", "internal/harness/packaged", "interception", "internal/metrics", "internal/prices", "providers",
		"providers/mock", "results", "results/postgres", "rollout", "tasksets", "tunnel", "workflows", "internal/namespace"},
	// Binaries and tools sit on top; nothing imports them.
	"starter":              {"*"},
	"worker":               {"*"},
	"cmd/evalflow-agent":   {"*"},
	"bench":                {"*"},
	"bench/cmd/bench":      {"*"},
	"bench/cmd/storebench": {"*"},
	"bench/cmd/tokenin":    {"*"},
	"tunnel/tunneltest":    {"tunnel"},
	"e2e":                  {},
	"faults":               {},
	"deploy":               {},
	// Checks the docs against the binaries' flags and the repository.
	"internal/docscheck": {},
	// `go test -json` read back as go test prints it, with where the time went.
	"internal/testreport": {},
	"":                    {},

	"cmd/evalflow-mcp-counter": {"*"},

	// The benchmarks' own libraries: the load generator, the eval on
	// Temporal, the targets and the mock model, internal to bench.
	"bench/internal/loadgen":       {"*"},
	"bench/internal/orchestration": {"*"},
	"bench/internal/targets":       {"*"},
	"bench/internal/tokenin":       {"*"},
	"bench/internal/upstream":      {"*"},
}

// top are the packages nothing else may import.
var top = []string{"starter", "worker", "cmd/evalflow-agent", "cmd/evalflow-mcp-counter", "e2e", "faults", "bench/cmd/bench", "bench/cmd/storebench", "bench/cmd/tokenin"}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v", args)
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportsPointDownward(t *testing.T) {
	for _, p := range goList(t, "./...") {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "github.com/evalflow/evalflow")
		may, ok := allowed[name]
		if !assert.True(t, ok, "package %q is not placed in ARCHITECTURE.md's import graph (architecture_test.go)", name) {
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			assert.False(t, slices.Contains(top, dep), "%s imports %s, which nothing may import", name, dep)
			if slices.Contains(may, "*") {
				continue
			}
			assert.Contains(t, may, dep, "%s may not import %s (ARCHITECTURE.md)", name, dep)
		}
	}
}

// TestContractLinksNoTransport: a trainer importing pull, or a worker
// replaying workflows, links the Temporal SDK, the rollout contract and the
// data it carries (traces, trajectories, the dialects' vocabulary), and
// none of evalflow's transports, tunnels or subprocess runners.
func TestContractLinksNoTransport(t *testing.T) {
	for _, p := range goList(t, "-deps=false", "./workflows", "./pull", "./rollout") {
		deps := goList(t, "-deps", p.ImportPath)
		for _, d := range deps {
			dep, ours := strings.CutPrefix(d.ImportPath, module)
			if ours {
				assert.Contains(t, []string{"rollout", "workflows", "pull", "trajectory", "trace", "dialects", "internal/jsonwire"}, dep, "%s links %s", p.ImportPath, dep)
			}
			for _, banned := range []string{"github.com/fatedier/frp", "golang.org/x/crypto/ssh", "os/exec"} {
				assert.False(t, strings.HasPrefix(d.ImportPath, banned), "%s links %s", p.ImportPath, d.ImportPath)
			}
		}
	}
	for _, d := range goList(t, "-deps", "./rollout") {
		if d.ImportPath != module+"rollout" {
			assert.NotContains(t, d.ImportPath, ".", "rollout imports only the standard library, not %s", d.ImportPath)
		}
	}
}

// TestAProgramOfItsOwnStartsTheInterception: the interception server and
// the providers are public packages; examples/rig, a module of its own,
// starts a server through them and calls it with the OpenAI SDK.
func TestAProgramOfItsOwnStartsTheInterception(t *testing.T) {
	cmd := exec.Command("go", "test", "-count=1", "./...")
	cmd.Dir = "examples/rig"
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "ok  \texample.com/rig")
}
