package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/run"
	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/workflows"
)

func TestTasksetFieldFlags(t *testing.T) {
	cfg, err := parseEval(t, "--taskset", "data/gsm8k.parquet", "--taskset.prompt-field", "question", "--taskset.answer-field", "final answer")
	require.NoError(t, err)
	assert.Equal(t, "data/gsm8k.parquet?answer=final+answer&prompt=question", cfg.Taskset, "the mapping travels in the taskset's name")

	cfg, err = parseEval(t, "--taskset", "data/tasks.csv")
	require.NoError(t, err)
	assert.Equal(t, "data/tasks.csv", cfg.Taskset, "no mapping given: the defaults")
}

// writeDemoRegistry writes a registry listing demo@1.0 and demo@2.0, its
// one task at commit, and returns its path.
func writeDemoRegistry(t *testing.T, commit string) string {
	t.Helper()
	task := []tasksets.RegistryTask{{Name: "hello", GitURL: "file:///srv/bench.git", GitCommitID: commit, Path: "tasks/hello"}}
	b, err := json.Marshal([]tasksets.Dataset{{Name: "demo", Version: "1.0", Tasks: task}, {Name: "demo", Version: "2.0", Tasks: task}})
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "registry.json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestTasksetFromRegistry(t *testing.T) {
	t.Setenv(tasksets.RegistryEnv, "")
	commit := strings.Repeat("ab", 20)
	reg := writeDemoRegistry(t, commit)

	cfg, err := parseEval(t, "--taskset", "demo@1.0", "--registry", reg)
	require.NoError(t, err)
	l, ok, err := tasksets.ParseLock(cfg.Taskset)
	require.NoError(t, err)
	require.True(t, ok, "the run carries the resolved tasks: %q", cfg.Taskset)
	assert.Equal(t, "demo@1.0", l.String())
	assert.Equal(t, commit, l.Tasks[0].GitCommitID)

	t.Setenv(tasksets.RegistryEnv, reg)
	fromEnv, err := parseEval(t, "--taskset", "demo@1.0")
	require.NoError(t, err)
	assert.Equal(t, cfg.Taskset, fromEnv.Taskset, "%s names the registry when --registry is not given", tasksets.RegistryEnv)

	_, err = parseEval(t, "--taskset", "demo@3.0", "--registry", reg)
	require.Error(t, err)
	assert.Equal(t, "--taskset demo@3.0: dataset demo has no version 3.0 in the registry; its versions: 1.0, 2.0", err.Error())
}

// With no --registry and no EVALFLOW_REGISTRY, name@version resolves
// through Harbor's registry (here a loopback server standing in for it).
func TestTasksetFromTheDefaultRegistry(t *testing.T) {
	t.Setenv(tasksets.RegistryEnv, "")
	commit := strings.Repeat("ef", 20)
	body, err := json.Marshal([]tasksets.Dataset{{Name: "terminal-bench", Version: "2.0", Tasks: []tasksets.RegistryTask{
		{Name: "hello", GitURL: "file:///srv/bench.git", GitCommitID: commit, Path: "tasks/hello"},
	}}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	old := tasksets.DefaultRegistry
	tasksets.DefaultRegistry = srv.URL + "/registry.json"
	t.Cleanup(func() { tasksets.DefaultRegistry = old })

	cfg, err := parseEval(t, "--taskset", "terminal-bench@2.0")
	require.NoError(t, err)
	l, ok, err := tasksets.ParseLock(cfg.Taskset)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "terminal-bench@2.0", l.String())
	assert.Equal(t, commit, l.Tasks[0].GitCommitID)

	_, err = parseEval(t, "--taskset", "terminal-bench@3.0")
	require.Error(t, err)
	assert.Equal(t, "--taskset terminal-bench@3.0: dataset terminal-bench has no version 3.0 in the registry; its versions: 2.0", err.Error())
}

func TestChangedErrorNamesTheTasksAtOtherCommits(t *testing.T) {
	lock := func(commit string) string {
		return tasksets.Lock{Name: "demo", Version: "1.0", Tasks: []tasksets.RegistryTask{
			{Name: "hello", GitURL: "file:///srv/bench.git", GitCommitID: commit, Path: "tasks/hello"},
		}}.Ref()
	}
	was, now := strings.Repeat("a", 40), strings.Repeat("b", 40)
	err := changedError(&run.ChangedError{
		RunID: "r1", Settings: []string{"taskset"},
		Was: workflows.RunConfig{Taskset: lock(was)}, Now: workflows.RunConfig{Taskset: lock(now)},
	}, "resume with the same flags, or add --force")
	assert.Equal(t, "run r1 was started with other settings (--taskset); taskset demo@1.0 now resolves to other tasks: task hello at commit bbbbbbbbbbbb, was aaaaaaaaaaaa; resume with the same flags, or add --force", err.Error())
}

func TestResumeResolvesTheRunsDatasetAgain(t *testing.T) {
	t.Setenv(tasksets.RegistryEnv, "")
	newer := strings.Repeat("cd", 20)
	reg := writeDemoRegistry(t, newer)
	cctx := func(args ...string) *cli.Context {
		set := flag.NewFlagSet("resume", flag.ContinueOnError)
		for _, f := range resumeCommand().Flags {
			require.NoError(t, f.Apply(set))
		}
		require.NoError(t, set.Parse(args))
		c := cli.NewContext(&cli.App{}, set, nil)
		c.Context = context.Background()
		return c
	}
	assert.Nil(t, retaskset(cctx()), "no registry named: the run goes on with the commits it carries")

	stored := tasksets.Lock{Name: "demo", Version: "1.0", Tasks: []tasksets.RegistryTask{
		{Name: "hello", GitURL: "file:///srv/bench.git", GitCommitID: strings.Repeat("ab", 20), Path: "tasks/hello"},
	}}.Ref()
	again := retaskset(cctx("--registry", reg))
	require.NotNil(t, again)
	now, err := again(stored)
	require.NoError(t, err)
	l, ok, err := tasksets.ParseLock(now)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, newer, l.Tasks[0].GitCommitID, "demo@1.0 as the registry has it now")
	kept, err := again("sample")
	require.NoError(t, err)
	assert.Empty(t, kept, "a taskset not from a registry is left as it is")
}
