package wiring

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
)

// describe lists flags one a line: names (aliases too), env vars, and
// whether the flag is hidden, sorted by name.
func describe(flags []cli.Flag) []string {
	var lines []string
	for _, f := range flags {
		line := "--" + strings.Join(f.Names(), " --")
		if e, ok := f.(interface{ GetEnvVars() []string }); ok && len(e.GetEnvVars()) > 0 {
			line += " " + strings.Join(e.GetEnvVars(), " ")
		}
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			line += " (hidden)"
		}
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return lines
}

// The worker flag set, as users script it: names and env vars change only
// on purpose, with this file.
func TestWorkerFlagsGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/worker_flags.txt")
	require.NoError(t, err)
	got := strings.Join(describe(WorkerFlags()), "\n") + "\n"
	assert.Equal(t, string(want), got, "WorkerFlags() changed: update testdata/worker_flags.txt and the worker flags table of docs/clusters.md")
}

func TestWorkerFlagsHaveEnvVars(t *testing.T) {
	names, envs := map[string]bool{}, map[string]string{}
	for _, f := range WorkerFlags() {
		for _, n := range f.Names() {
			assert.False(t, names[n], "flag --%s is defined twice", n)
			names[n] = true
		}
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue // a hidden former name
		}
		vars := f.(interface{ GetEnvVars() []string }).GetEnvVars()
		own := 0
		for _, e := range vars {
			if strings.HasPrefix(e, "EVALFLOW_") {
				own++
			}
			prev, dup := envs[e]
			assert.False(t, dup, "env var %s belongs to --%s and --%s", e, prev, f.Names()[0])
			envs[e] = f.Names()[0]
		}
		assert.Equal(t, 1, own, "--%s has env vars %v, want one EVALFLOW_*", f.Names()[0], vars)
	}
}

// parseWorker runs args through an app with the worker flags and returns
// the configuration they make, in a fresh directory (the default run store
// is ./runs).
func parseWorker(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	t.Chdir(t.TempDir())
	var (
		got Config
		err error
	)
	app := &cli.App{
		Flags: WorkerFlags(),
		Action: func(cctx *cli.Context) error {
			var closeRuntime func() error
			got, closeRuntime, err = ConfigFromFlags(cctx)
			if err == nil {
				require.NoError(t, closeRuntime())
			}
			return nil
		},
	}
	require.NoError(t, app.Run(append([]string{"worker"}, args...)))
	return got, err
}

func TestConfigFromFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"defaults", nil, nil, func(t *testing.T, c Config) {
			assert.Equal(t, DefaultTaskQueue, c.TaskQueue)
			assert.Equal(t, "runs", c.RunsDir)
			assert.Equal(t, 64, c.MaxRollouts)
			assert.Equal(t, 32, c.Multiplex)
			assert.Equal(t, "chat", c.UpstreamDialect)
			assert.Equal(t, 0.1, c.Mock.ErrorRate)
			assert.NotNil(t, c.Runtime)
			assert.Empty(t, c.MetricsAddr, "metrics are off unless asked")
			assert.Equal(t, "default", c.Namespace)
			assert.False(t, c.SkipUnsupported, "what a runtime cannot carry out is refused unless asked")
		}},
		{"metrics", []string{"--metrics-addr", "127.0.0.1:9464", "--namespace", "ns"}, nil, func(t *testing.T, c Config) {
			assert.Equal(t, "127.0.0.1:9464", c.MetricsAddr)
			assert.Equal(t, "ns", c.Namespace, "the SDK's metrics are tagged with it")
		}},
		{"flags", []string{"--max-rollouts", "8", "--interception.multiplex", "4", "--work-dir", "/w", "--mock-latency", "5ms",
			"--mock-error-rate", "0", "--api-key-env", "MY_KEY", "--base-url", "http://p/v1", "--runs-dir", "/r", "--task-queue", "q"}, nil,
			func(t *testing.T, c Config) {
				assert.Equal(t, 8, c.MaxRollouts)
				assert.Equal(t, 4, c.Multiplex)
				assert.Equal(t, "/w", c.WorkDir)
				assert.Equal(t, 5*time.Millisecond, c.Mock.Latency)
				assert.Zero(t, c.Mock.ErrorRate)
				assert.Equal(t, "MY_KEY", c.APIKeyEnv)
				assert.Equal(t, "http://p/v1", c.BaseURL)
				assert.Equal(t, "/r", c.RunsDir)
				assert.Equal(t, "q", c.TaskQueue)
			}},
		{"bwrap", []string{"--runtime", "bwrap", "--work-dir", "/w"}, nil, func(t *testing.T, c Config) {
			b := c.Runtime.(*local.Bwrap)
			assert.Equal(t, local.Runtime{Dir: "/w"}, b.Local)
			assert.False(t, b.HostNet || b.IsolateNet)
			assert.NotEmpty(t, b.Agent, "the forwarder's program: a lean agent, else this binary")
			assert.False(t, harness.IsRemote(c.Runtime), "the forwarder reaches the interception on loopback")
		}},
		{"Dockerfile lines skipped", []string{"--runtime.skip-unsupported"}, nil, func(t *testing.T, c Config) {
			assert.True(t, c.SkipUnsupported)
		}},
		{"Dockerfile lines skipped, from the environment", nil, map[string]string{"EVALFLOW_SKIP_UNSUPPORTED": "true"}, func(t *testing.T, c Config) {
			assert.True(t, c.SkipUnsupported)
		}},
		{"bwrap with its own network", nil, map[string]string{"EVALFLOW_RUNTIME": "bwrap", "EVALFLOW_BWRAP_ISOLATE_NET": "true"}, func(t *testing.T, c Config) {
			b := c.Runtime.(*local.Bwrap)
			assert.True(t, b.IsolateNet)
			assert.True(t, harness.IsRemote(c.Runtime), "an isolated sandbox needs a tunnel")
		}},
		{"bwrap on the host's network", []string{"--runtime", "bwrap", "--runtime.bwrap-host-net"}, nil, func(t *testing.T, c Config) {
			assert.True(t, c.Runtime.(*local.Bwrap).HostNet)
			assert.False(t, harness.IsRemote(c.Runtime))
		}},
		{"gateway", []string{"--gateway-addr", "127.0.0.1:8470", "--gateway-ttl", "30m"}, map[string]string{"EVALFLOW_GATEWAY_TOKEN": "gw"},
			func(t *testing.T, c Config) {
				assert.Equal(t, "127.0.0.1:8470", c.Interception.GatewayAddr)
				assert.Equal(t, 30*time.Minute, c.Interception.GatewayTTL)
				assert.Equal(t, "gw", c.Interception.GatewayToken)
			}},
		{"the starter's former name", []string{"--worker-rollouts", "3"}, nil, func(t *testing.T, c Config) {
			assert.Equal(t, 3, c.MaxRollouts)
		}},
		{"the new name wins", []string{"--worker-rollouts", "3", "--max-rollouts", "5"}, nil, func(t *testing.T, c Config) {
			assert.Equal(t, 5, c.MaxRollouts)
		}},
		{"environment", nil, map[string]string{
			"EVALFLOW_MULTIPLEX": "7", "EVALFLOW_API_KEY_ENV": "K", "EVALFLOW_MAX_ROLLOUTS": "9", "EVALFLOW_WORK_DIR": "/e",
			"EVALFLOW_MOCK_ERROR_RATE": "0.5", "EVALFLOW_MOCK_LATENCY": "1s", "OPENAI_BASE_URL": "http://o/v1",
		}, func(t *testing.T, c Config) {
			assert.Equal(t, 7, c.Multiplex)
			assert.Equal(t, "K", c.APIKeyEnv)
			assert.Equal(t, 9, c.MaxRollouts)
			assert.Equal(t, "/e", c.WorkDir)
			assert.Equal(t, 0.5, c.Mock.ErrorRate)
			assert.Equal(t, time.Second, c.Mock.Latency)
			assert.Equal(t, "http://o/v1", c.BaseURL)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := parseWorker(t, tt.args...)
			require.NoError(t, err, "ConfigFromFlags(%q)", tt.args)
			tt.check(t, c)
		})
	}
}

func TestConfigFromFlagsErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-rollouts", "0"}, "--max-rollouts 0"},
		{[]string{"--worker-rollouts", "-1"}, "--max-rollouts -1"},
		{[]string{"--multiplex", "0"}, "--multiplex 0"},
		{[]string{"--interception.multiplex", "0"}, "--interception.multiplex 0"},
		{[]string{"--multiplex", "3", "--interception.multiplex", "4"}, "disagree"},
		{[]string{"--mock-error-rate", "1.5"}, "--mock-error-rate"},
		{[]string{"--mock-latency", "-1s"}, "--mock-latency"},
		{[]string{"--runtime", "vm"}, "unknown runtime \"vm\" (want auto, docker, bwrap, local or netns)"},
		{[]string{"--interception.type", "ngrok"}, "unknown type"},
		{[]string{"--gateway-addr", "127.0.0.1:8470"}, "--gateway-addr needs --interception.gateway-token"},
		{[]string{"--prices", "/nonexistent/prices.yaml"}, "--prices: open /nonexistent/prices.yaml"},
	} {
		_, err := parseWorker(t, tt.args...)
		require.Error(t, err, "ConfigFromFlags(%q)", tt.args)
		assert.Contains(t, err.Error(), tt.want, "ConfigFromFlags(%q)", tt.args)
	}
}

func TestNewLogHandler(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    string // in the output of one Info and one Warn record
		notWant string
		err     string
	}{
		{nil, `level=INFO msg=started`, "", ""},
		{[]string{"--log-level", "warn"}, `level=WARN msg=careful`, "started", ""},
		{[]string{"--log-format", "json"}, `"msg":"started"`, "", ""},
		{[]string{"--log-level", "loud"}, "", "", "--log-level"},
		{[]string{"--log-format", "xml"}, "", "", "--log-format"},
	} {
		var buf bytes.Buffer
		set := flag.NewFlagSet("log", flag.ContinueOnError)
		for _, f := range LogFlags() {
			require.NoError(t, f.Apply(set))
		}
		require.NoError(t, set.Parse(tt.args))
		h, err := NewLogHandler(cli.NewContext(&cli.App{}, set, nil), &buf)
		if tt.err != "" {
			require.Error(t, err, "NewLogHandler(%q)", tt.args)
			assert.Contains(t, err.Error(), tt.err)
			continue
		}
		require.NoError(t, err, "NewLogHandler(%q)", tt.args)
		logger := slog.New(h)
		logger.Info("started")
		logger.Warn("careful")
		assert.Contains(t, buf.String(), tt.want, "NewLogHandler(%q)", tt.args)
		if tt.notWant != "" {
			assert.NotContains(t, buf.String(), tt.notWant, "NewLogHandler(%q)", tt.args)
		}
	}
}

func TestVersion(t *testing.T) {
	noID := func() string { return "" }
	id := func() string { return "3fa1c2d9e0b1" }
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: "4096593abcdef0123456789"},
			{Key: "vcs.time", Value: "2026-11-26T20:00:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	devel := debug.Module{Version: "(devel)"}
	for _, tt := range []struct {
		stamp string
		bi    *debug.BuildInfo
		id    func() string
		want  string
	}{
		{"24636c3-dirty", &debug.BuildInfo{Main: devel}, noID, "24636c3-dirty"},
		{"v1.5.0", &debug.BuildInfo{Main: devel, Settings: vcs("false")}, noID, "v1.5.0"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: vcs("false")}, noID, "v1.4.0 (commit 4096593abcde)"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, noID, "v1.4.0"},
		{"", &debug.BuildInfo{Main: devel, Settings: vcs("true")}, noID, "commit 4096593abcde, modified (2026-11-26T20:00:00Z)"},
		// -buildvcs=false, or a tarball: the build id names the build.
		{"", &debug.BuildInfo{Main: devel}, id, "unversioned build 3fa1c2d9e0b1 (build with scripts/build.sh or make to stamp a version)"},
		{"", nil, id, "unversioned build 3fa1c2d9e0b1 (build with scripts/build.sh or make to stamp a version)"},
		{"", nil, noID, "unversioned build (build with scripts/build.sh or make to stamp a version)"},
	} {
		got := version(tt.stamp, tt.bi, tt.id)
		assert.Equal(t, tt.want, got, "version(%q, %+v)", tt.stamp, tt.bi)
		assert.NotContains(t, got, "devel")
	}
	assert.NotEmpty(t, Version())
	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Len(t, buildIDOf(exe), 12, "the test binary's own Go build id")
}

// A binary built with -buildvcs=false and without scripts/build.sh's stamp
// (a build from a tarball) still names itself, and one built by
// scripts/build.sh says the stamped version.
func TestVersionOfBuiltBinaries(t *testing.T) {
	// A program of the module (testdata is no package of its own to go
	// build ./..., and internal/ lets it import wiring).
	probe := filepath.Join("testdata", "versionprobe")
	require.NoError(t, os.MkdirAll(probe, 0o755))
	t.Cleanup(func() { os.RemoveAll(probe) })
	require.NoError(t, os.WriteFile(filepath.Join(probe, "main.go"), []byte(`package main

import (
	"fmt"

	"github.com/evalflow/evalflow/internal/wiring"
)

func main() { fmt.Print(wiring.Version()) }
`), 0o644))
	dir := t.TempDir()

	plain := filepath.Join(dir, "plain")
	out, err := exec.Command("go", "build", "-buildvcs=false", "-o", plain, "./"+probe).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := exec.Command(plain).Output()
	require.NoError(t, err)
	assert.Regexp(t, `^unversioned build [0-9A-Za-z_-]{12} \(`, string(got))

	stamped := filepath.Join(dir, "stamped")
	build := exec.Command("bash", "scripts/build.sh", stamped, "./internal/wiring/"+probe, "-buildvcs=false")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "EVALFLOW_VERSION=")
	out, err = build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err = exec.Command(stamped).Output()
	require.NoError(t, err)
	describe, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	require.NoError(t, err, "the checkout's own version")
	assert.Equal(t, strings.TrimSpace(string(describe)), string(got), "scripts/build.sh stamps git describe")
}

// --prices merges the operator's table over the bundled one.
func TestPricesFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.yaml")
	require.NoError(t, os.WriteFile(path, []byte("my-model: {input: 1, output: 2}\n"), 0o644))
	cfg, err := parseWorker(t, "--prices", path)
	require.NoError(t, err)
	p, ok := cfg.Prices.Lookup("my-model")
	require.True(t, ok, "the file's model is priced")
	assert.Equal(t, 2.0, p.Output)
	_, ok = cfg.Prices.Lookup("mock")
	assert.True(t, ok, "the bundled table's models stay")

	require.NoError(t, os.WriteFile(path, []byte("my-model: {input: 1, ouput: 2}\n"), 0o644))
	_, err = parseWorker(t, "--prices", path)
	assert.ErrorContains(t, err, `--prices prices.yaml: model "my-model": unknown field "ouput"`)
}
