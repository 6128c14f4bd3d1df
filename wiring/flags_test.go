package wiring

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// parse runs args through an app with the interception flags.
func parse(t *testing.T, args ...string) (Interception, error) {
	t.Helper()
	var got Interception
	var err error
	app := &cli.App{
		Flags: append(InterceptionFlags(), &cli.IntFlag{Name: "multiplex", Value: 32}),
		Action: func(cctx *cli.Context) error {
			got, err = InterceptionFromFlags(cctx)
			return nil
		},
	}
	require.NoError(t, app.Run(append([]string{"worker"}, args...)))
	return got, err
}

func TestInterceptionFromFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "interception.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"type":"frp","frp_server":"frps.example:7001","frp_token":"ignored","health_interval":5000000000}`), 0o600))
	t.Setenv("EVALFLOW_FRP_TOKEN", "from-env")

	got, err := parse(t, "--interception.config", file, "--interception.frp.public-host", "edge.example")
	require.NoError(t, err)
	assert.Equal(t, "frp", got.Type)
	assert.Equal(t, "frps.example:7001", got.FRPServer)
	assert.Equal(t, "from-env", got.FRPToken, "the token comes from the environment, never the file")
	assert.Equal(t, "edge.example", got.FRPPublicHost)
	assert.Equal(t, int64(5e9), int64(got.HealthInterval))

	got, err = parse(t, "--interception.config", file, "--interception.type", "local")
	require.NoError(t, err)
	assert.Equal(t, "local", got.Type, "a flag overrides the file")

	_, err = parse(t, "--interception.type", "custom", "--interception.url", "http://h:1", "--interception.port", "1", "--multiplex", "8")
	assert.ErrorContains(t, err, "multiplex")
	_, err = parse(t, "--interception.type", "custom", "--interception.url", "http://h:1", "--interception.port", "1")
	assert.NoError(t, err, "the multiplex default is not a setting")
}

func TestInterceptionFromFlagsFRPNeedsToken(t *testing.T) {
	t.Setenv("EVALFLOW_FRP_TOKEN", "")
	require.NoError(t, os.Unsetenv("EVALFLOW_FRP_TOKEN"))
	t.Setenv("EVALFLOW_FRP_TOKEN_FILE", "")
	require.NoError(t, os.Unsetenv("EVALFLOW_FRP_TOKEN_FILE"))

	_, err := parse(t, "--interception.type", "frp", "--interception.frp.server", "frps.example:7000")
	assert.EqualError(t, err, "frp tunnel: a token is required (EVALFLOW_FRP_TOKEN or --interception.frp.token-file)")

	t.Setenv("EVALFLOW_FRP_TOKEN", "from-env")
	_, err = parse(t, "--interception.type", "frp", "--interception.frp.server", "frps.example:7000")
	assert.NoError(t, err)
}
