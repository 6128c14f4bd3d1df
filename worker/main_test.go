package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/docscheck"
	"github.com/evalflow/evalflow/internal/wiring"
)

// The worker binary takes the shared worker flags, the same set as the
// starter's in-process worker (starter's TestWorkerFlagsAreShared), and
// its own flags for how it starts and stops.
func TestFlagsAreTheSharedSet(t *testing.T) {
	assert.Equal(t, docscheck.FlagNames(append(wiring.WorkerFlags(), wiring.ServiceFlags()...)), docscheck.FlagNames(newApp().Flags))
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
