package wiring

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/tunnel"
)

// parse runs args through an app with the interception flags.
func parse(t *testing.T, args ...string) (Interception, error) {
	t.Helper()
	var got Interception
	var err error
	app := &cli.App{
		Flags: InterceptionFlags(),
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

func TestInterceptionMultiplexSpellings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "interception.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"type":"local","multiplex":16}`), 0o600))
	tests := []struct {
		name    string
		args    []string
		want    int
		warns   bool
		wantErr string
	}{
		{"unset", nil, 0, false, ""},
		{"new name", []string{"--interception.multiplex", "8"}, 8, false, ""},
		{"config file", []string{"--interception.config", file}, 16, false, ""},
		{"flag over config file", []string{"--interception.config", file, "--interception.multiplex", "4"}, 4, false, ""},
		{"former name", []string{"--multiplex", "8"}, 8, true, ""},
		{"both, agreeing", []string{"--multiplex", "8", "--interception.multiplex", "8"}, 8, true, ""},
		{"both, disagreeing", []string{"--multiplex", "8", "--interception.multiplex", "4"}, 0, false,
			"--multiplex 8 and --interception.multiplex 4 disagree: --multiplex is the former name of --interception.multiplex; give only --interception.multiplex"},
		{"former name against the config file", []string{"--interception.config", file, "--multiplex", "8"}, 0, false,
			"--multiplex 8 and the interception config's multiplex 16 disagree"},
		{"zero", []string{"--interception.multiplex", "0"}, 0, false, "--interception.multiplex 0: at least 1 rollout"},
		{"custom takes none", []string{"--interception.type", "custom", "--interception.url", "http://h:1", "--interception.port", "1", "--interception.multiplex", "2"}, 0, false,
			"custom is one shared server; multiplex does not apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(t, tt.args...)
			if tt.wantErr != "" {
				require.Error(t, err, "InterceptionFromFlags(%q)", tt.args)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err, "InterceptionFromFlags(%q)", tt.args)
			assert.Equal(t, tt.want, got.Multiplex)
			if tt.warns {
				require.Len(t, got.Warnings, 1)
				assert.Contains(t, got.Warnings[0], "--multiplex (EVALFLOW_MULTIPLEX) is deprecated: use --interception.multiplex")
			} else {
				assert.Empty(t, got.Warnings)
			}
		})
	}
}

func TestFormerMultiplexFromTheEnvironment(t *testing.T) {
	t.Setenv("EVALFLOW_MULTIPLEX", "6")
	got, err := parse(t)
	require.NoError(t, err)
	assert.Equal(t, 6, got.Multiplex)
	assert.Len(t, got.Warnings, 1, "the former variable warns too")
}

func TestCreationLimitIsTheWorkersOwn(t *testing.T) {
	t.Setenv("EVALFLOW_FRP_TOKEN", "tok")
	file := filepath.Join(t.TempDir(), "limit")
	got, err := parse(t, "--interception.type", "frp", "--interception.frp.server", "frps.example:7000",
		"--interception.creations-per-minute", "64", "--interception.creation-limit-file", file)
	require.NoError(t, err)
	tun, err := got.tunnel(false)
	require.NoError(t, err)
	assert.Equal(t, tunnel.NewHostLimiter(file, 64), tun.(*tunnel.FRP).Limiter, "the tunnel draws from the host's bucket in that file")

	_, err = parse(t, "--interception.creations-per-minute", "-1")
	assert.ErrorContains(t, err, "creations per minute -1 is negative")
}
