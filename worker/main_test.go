package main

import (
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/wiring"
)

// names lists flags by name and aliases, with their env vars.
func names(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		line := strings.Join(f.Names(), ",")
		if e, ok := f.(interface{ GetEnvVars() []string }); ok {
			line += " " + strings.Join(e.GetEnvVars(), ",")
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// The worker binary takes the shared worker flags, the same set as the
// starter's in-process worker (starter's TestWorkerFlagsAreShared), and
// its own flags for how it starts and stops.
func TestFlagsAreTheSharedSet(t *testing.T) {
	assert.Equal(t, names(append(wiring.WorkerFlags(), wiring.ServiceFlags()...)), names(newApp().Flags))
}

func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	require.NoError(t, app.Run([]string{"worker", "--version"}))
	assert.Regexp(t, `^worker version \S.*\n$`, out.String())
	assert.NotContains(t, out.String(), "devel", "a test binary has no VCS stamp: it names its build")
}

func TestRefusesArguments(t *testing.T) {
	app := newApp()
	app.Action = func(*cli.Context) error { t.Fatal("the worker started"); return nil }
	err := app.Run([]string{"worker", "--runs-dir", "/r", "serve", "--address", "elsewhere:7233"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unexpected argument "serve"`)
}

// The worker reads the secure-connection flags, and their environment
// variables, like the starter: a wrong set is refused before any dial.
func TestSecureConnectionFlags(t *testing.T) {
	t.Setenv("TEMPORAL_API_KEY", "tmprl-secret-key-42")
	t.Setenv("TEMPORAL_TLS_CERT", "/nonexistent/client.pem")
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run([]string{"worker", "--runs-dir", t.TempDir(), "--address", "127.0.0.1:1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--tls-cert is set without --tls-key")
	assert.NotContains(t, err.Error()+out.String(), "tmprl-secret-key-42")
}
