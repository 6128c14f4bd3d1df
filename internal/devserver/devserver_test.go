package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

const runIDAttr = "EvalflowRunId"

var runIDKey = temporal.NewSearchAttributeKeyKeyword(runIDAttr)

// occupy listens on port until the test ends.
func occupy(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
}

func testConfig(t *testing.T, dataDir string) Config {
	t.Helper()
	// Below the ephemeral range: no connection takes them before the server binds.
	port, err := FreePort(DefaultIP)
	require.NoError(t, err)
	uiPort, err := FreePort(DefaultIP)
	require.NoError(t, err)
	return Config{
		DataDir:          dataDir,
		Port:             port,
		UIPort:           uiPort,
		SearchAttributes: map[string]enumspb.IndexedValueType{runIDAttr: enumspb.INDEXED_VALUE_TYPE_KEYWORD},
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func dial(t *testing.T, s *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  s.Address(),
		Namespace: DefaultNamespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func greet(_ workflow.Context, name string) (string, error) {
	return "hello " + name, nil
}

func TestWorkflowSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := startServer(t, cfg)
	// WAL mode took effect, and the server logs to the data dir.
	assert.FileExists(t, filepath.Join(dir, "temporal.db-wal"))
	assert.FileExists(t, filepath.Join(dir, "temporal.log"))
	c := dial(t, first)
	w := worker.New(c, "devserver-test", worker.Options{})
	w.RegisterWorkflowWithOptions(greet, workflow.RegisterOptions{Name: "greet"})
	require.NoError(t, w.Start())
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "greet-1",
		TaskQueue:             "devserver-test",
		TypedSearchAttributes: temporal.NewSearchAttributes(runIDKey.ValueSet("run-1")),
	}, "greet", "evalflow")
	require.NoError(t, err)
	var got string
	require.NoError(t, run.Get(ctx, &got))
	assert.Equal(t, "hello evalflow", got)
	w.Stop()
	c.Close()
	require.NoError(t, first.Stop())
	require.FileExists(t, filepath.Join(dir, "temporal.db"))

	second := startServer(t, cfg)
	c = dial(t, second)
	desc, err := c.DescribeWorkflowExecution(ctx, "greet-1", run.GetRunID())
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())

	// Visibility is written asynchronously: poll until the row shows up.
	query := fmt.Sprintf("%s = 'run-1'", runIDAttr)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		require.NoError(ct, err)
		var ids []string
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		assert.Equal(ct, []string{"greet-1"}, ids, "ListWorkflow(%q)", query)
	}, time.Minute, 50*time.Millisecond, "visibility lists the workflow")
}

// StartOnFreePort picks the frontend's port itself, below the ephemeral
// range, and the server answers there.
func TestStartOnFreePort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := StartOnFreePort(ctx, Config{DataDir: t.TempDir(), Port: 1, UIPort: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	_, port, err := net.SplitHostPort(s.Address())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, p, staticLow, "Address() = %s", s.Address())
	assert.Less(t, p, ephemeralLow(), "Address() = %s", s.Address())
	_, err = dial(t, s).CheckHealth(ctx, &client.CheckHealthRequest{})
	require.NoError(t, err)
}

func TestSearchAttributesOnRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SearchAttributes = nil
	require.NoError(t, startServer(t, cfg).Stop())

	// An attribute added by a later release is registered in the existing namespace.
	cfg.SearchAttributes = map[string]enumspb.IndexedValueType{runIDAttr: enumspb.INDEXED_VALUE_TYPE_KEYWORD}
	s := startServer(t, cfg)
	c := dial(t, s)
	resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: DefaultNamespace})
	require.NoError(t, err)
	assert.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, resp.GetCustomAttributes()[runIDAttr])
	c.Close()
	require.NoError(t, s.Stop())

	// One registered with another type fails the start and leaves nothing behind.
	cfg.SearchAttributes = map[string]enumspb.IndexedValueType{runIDAttr: enumspb.INDEXED_VALUE_TYPE_INT}
	_, err = Start(context.Background(), cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), runIDAttr)
	lock, err := lockDir(dir, "")
	require.NoError(t, err)
	require.NoError(t, lock.release())
	for _, port := range []int{cfg.Port, cfg.Port + httpPortOffset, cfg.UIPort} {
		ln, err := listenFree(DefaultIP, port, "")
		if assert.NoError(t, err, "port %d after a failed start", port) {
			assert.NoError(t, ln.Close())
		}
	}
}

func TestUIServesIndex(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	require.NotEmpty(t, s.UIURL())

	resp, err := http.Get(s.UIURL() + "/")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "GET %s/", s.UIURL())
}

func TestUIDisabled(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.UIPort = -1
	s := startServer(t, cfg)
	assert.Empty(t, s.UIURL())
	assert.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)), s.Address())
}

func TestStartReportsPortInUse(t *testing.T) {
	tests := []struct {
		name string
		busy func(Config) int
	}{
		{"frontend", func(c Config) int { return c.Port }},
		{"frontend http", func(c Config) int { return c.Port + httpPortOffset }},
		{"ui", func(c Config) int { return c.UIPort }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			port := tt.busy(cfg)
			occupy(t, port)

			s, err := Start(context.Background(), cfg)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), fmt.Sprintf("port %d is in use", port))
			assert.NoFileExists(t, filepath.Join(cfg.DataDir, "temporal.db"), "nothing may start before the port check")

			// Nothing was left holding the data directory.
			lock, err := lockDir(cfg.DataDir, "")
			require.NoError(t, err)
			require.NoError(t, lock.release())
		})
	}
}

func TestSecondStartOnDataDir(t *testing.T) {
	dir := t.TempDir()
	first := startServer(t, testConfig(t, dir))

	s, err := Start(context.Background(), testConfig(t, dir))
	require.Error(t, err)
	assert.Nil(t, s)
	assert.True(t, errors.Is(err, ErrAlreadyRunning), "Start on a held DataDir = %v, want ErrAlreadyRunning", err)
	assert.Contains(t, err.Error(), first.Address())

	// The refusal left the first server running.
	c := dial(t, first)
	_, err = c.CheckHealth(context.Background(), &client.CheckHealthRequest{})
	require.NoError(t, err)

	// Once the first stops, the directory is free again.
	require.NoError(t, first.Stop())
	require.NoError(t, first.Stop(), "Stop twice")
	startServer(t, testConfig(t, dir))
}

func TestDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	assert.Equal(t, DefaultDataDir, got.DataDir)
	assert.Equal(t, DefaultIP, got.IP)
	assert.Equal(t, DefaultPort, got.Port)
	assert.Equal(t, DefaultUIPort, got.UIPort)
	assert.Equal(t, DefaultNamespace, got.Namespace)
	assert.NotNil(t, got.Logger)
}
