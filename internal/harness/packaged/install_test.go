package packaged_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/internal/harness/packaged"
	"github.com/evalflow/evalflow/tasksets"
)

func TestInstallWithoutRegistryIsAClearConfigError(t *testing.T) {
	cache := t.TempDir()
	rt := &packaged.Runtime{
		Runtime: &local.Runtime{Dir: t.TempDir()},
		Installer: &packaged.Installer{Dir: cache, Env: []string{
			"npm_config_registry=http://127.0.0.1:1/",
			"npm_config_cache=" + t.TempDir(), // nothing cached to fall back on
			"npm_config_fetch_retries=0",
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := rt.Run(ctx, harness.Spec{Key: "run/0/0/0", Command: []string{"packaged:codex@0.169.0"},
		Task: tasksets.Task{ID: "t", Prompt: "hi"}})
	var cfgErr *harness.ConfigError
	require.ErrorAs(t, err, &cfgErr, "a harness that cannot be installed fails the run, not retried")
	msg := err.Error()
	for _, want := range []string{"npm install failed", "@openai/codex@0.169.0", "http://127.0.0.1:1/", "reachable"} {
		assert.Contains(t, msg, want)
	}
	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, strings.HasSuffix(e.Name(), ".lock"), "a failed install leaves nothing but its lock file, found %s", e.Name())
	}
}

// fakeNPM writes an npm that installs h's program after a pause (a slow
// download) and counts its installs in the file it returns.
func fakeNPM(t *testing.T, h packaged.Harness) (npm, count string) {
	t.Helper()
	dir := t.TempDir()
	count = filepath.Join(dir, "installs")
	npm = filepath.Join(dir, "npm")
	script := `#!/bin/sh
while [ "$1" != --prefix ]; do shift; done
prefix=$2
echo "$prefix" >>` + count + `
sleep 0.3
mkdir -p "$prefix/node_modules/.bin"
printf '#!/bin/sh\necho installed\n' >"$prefix/node_modules/.bin/` + h.Bin + `"
chmod +x "$prefix/node_modules/.bin/` + h.Bin + `"
`
	require.NoError(t, os.WriteFile(npm, []byte(script), 0o755))
	return npm, count
}

// TestConcurrentInstallsInstallOnce: installers sharing a cache (as workers
// on one machine do) install a version once, and each gets the program.
func TestConcurrentInstallsInstallOnce(t *testing.T) {
	h := packaged.ClaudeCode
	npm, count := fakeNPM(t, h)
	cache := t.TempDir()
	stale := filepath.Join(cache, ".claude-code@9.9.9.tmp-123")
	require.NoError(t, os.MkdirAll(filepath.Join(stale, "node_modules"), 0o755), "left by an installer killed half-way")
	var wg sync.WaitGroup
	bins := make([]string, 4)
	errs := make([]error, 4)
	for i := range bins {
		// One installer each: their locks are as separate as processes'.
		in := &packaged.Installer{Dir: cache, NPM: npm}
		wg.Go(func() { bins[i], errs[i] = in.Install(context.Background(), h, "9.9.9") })
	}
	wg.Wait()
	want := filepath.Join(cache, "claude-code@9.9.9", "node_modules", ".bin", "claude")
	for i := range bins {
		require.NoError(t, errs[i])
		assert.Equal(t, want, bins[i])
	}
	installs, err := os.ReadFile(count)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(installs), "\n"), "npm ran once: %s", installs)
	assert.NoDirExists(t, stale, "a half-done installation is cleared")

	// A later worker finds it in the cache without npm.
	again := &packaged.Installer{Dir: cache, NPM: filepath.Join(t.TempDir(), "no-npm")}
	bin, err := again.Install(context.Background(), h, "9.9.9")
	require.NoError(t, err)
	assert.Equal(t, want, bin)
}

func TestMissingNPMIsNamed(t *testing.T) {
	in := &packaged.Installer{Dir: t.TempDir(), NPM: filepath.Join(t.TempDir(), "npm")}
	_, err := in.Install(context.Background(), packaged.Codex, "1.0.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "npm is not installed")
	assert.Contains(t, err.Error(), "@openai/codex@1.0.0")
}

func TestParse(t *testing.T) {
	tests := []struct {
		command []string
		name    string
		version string
		ok      bool
		err     string
	}{
		{[]string{"packaged:codex@0.1.0"}, "codex", "0.1.0", true, ""},
		{packaged.Command(packaged.ClaudeCode, ""), "claude-code", packaged.ClaudeCode.Version, true, ""},
		{[]string{"packaged:gemini@1"}, "", "", true, `unknown packaged harness "gemini" (want one of codex, claude-code)`},
		{[]string{"packaged:codex"}, "", "", true, "names no version"},
		{[]string{"codex"}, "", "", false, ""},
		{[]string{"packaged:codex@1", "--flag"}, "", "", false, ""},
		{nil, "", "", false, ""},
	}
	for _, tt := range tests {
		h, version, ok, err := packaged.Parse(tt.command)
		assert.Equal(t, tt.ok, ok, "Parse(%q) ok", tt.command)
		if tt.err != "" {
			require.Error(t, err, "Parse(%q)", tt.command)
			assert.Contains(t, err.Error(), tt.err)
			continue
		}
		require.NoError(t, err, "Parse(%q)", tt.command)
		assert.Equal(t, tt.name, h.Name, "Parse(%q)", tt.command)
		assert.Equal(t, tt.version, version, "Parse(%q)", tt.command)
	}
}

// TestOtherCommandsPassThrough: a command that names no packaged harness
// runs on the wrapped runtime as it is.
func TestOtherCommandsPassThrough(t *testing.T) {
	rt := &packaged.Runtime{Runtime: &local.Runtime{Dir: t.TempDir()}, Installer: &packaged.Installer{Dir: t.TempDir()}}
	res, err := rt.Run(context.Background(), harness.Spec{Key: "run/0/0/0",
		Command: []string{"sh", "-c", `printf passed >"$EVALFLOW_ANSWER_FILE"`}, Task: tasksets.Task{ID: "t", Prompt: "hi"}})
	require.NoError(t, err)
	assert.Equal(t, "passed", res.Answer)
	assert.Empty(t, res.SessionLogs)
}

func TestUnsupportedRuntimeIsAConfigError(t *testing.T) {
	rt := &packaged.Runtime{Runtime: &local.Runtime{}, Installer: &packaged.Installer{Dir: t.TempDir()},
		Unsupported: "the docker runtime cannot run it"}
	_, err := rt.Run(context.Background(), harness.Spec{Command: packaged.Command(packaged.Codex, "")})
	var cfgErr *harness.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	assert.Equal(t, "packaged harness codex: the docker runtime cannot run it", err.Error())
}
