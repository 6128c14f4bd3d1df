package wiring

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/tunnel"
)

// remoteRuntime is a runtime that says its harnesses are remote.
type remoteRuntime struct{ *local.Runtime }

func (remoteRuntime) Remote() bool { return true }

func TestInterceptionTunnel(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("tok-from-file\n"), 0o600))
	emptyToken := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(emptyToken, []byte(" \n"), 0o600))
	tests := []struct {
		name    string
		c       Interception
		remote  bool
		want    tunnel.Tunnel
		wantErr string
	}{
		{"default local", Interception{}, false, tunnel.Local{}, ""},
		{"local runtime ignores frp", Interception{Type: "frp", FRPServer: "frps.example:7000", FRPToken: "tok"}, false, tunnel.Local{}, ""},
		{"custom", Interception{Type: "custom", URL: "https://evals.example", Port: 8765}, true, tunnel.Custom{URL: "https://evals.example", Port: 8765}, ""},
		{"custom with multiplex", Interception{Type: "custom", URL: "https://evals.example", Port: 8765, Multiplex: 8}, true, nil, "multiplex"},
		{"custom without port", Interception{Type: "custom", URL: "https://evals.example"}, true, nil, "port"},
		{"frp", Interception{Type: "frp", FRPServer: "frps.example", FRPTokenFile: token}, true,
			&tunnel.FRP{ServerAddr: "frps.example", ServerPort: 7000, Token: "tok-from-file", Limiter: tunnel.NewHostLimiter("", 0)}, ""},
		{"frp without server", Interception{Type: "frp"}, true, nil, "address is required"},
		{"frp without token", Interception{Type: "frp", FRPServer: "frps.example"}, true, nil,
			"frp tunnel: a token is required (EVALFLOW_FRP_TOKEN or --interception.frp.token-file)"},
		{"frp without token, local runtime", Interception{Type: "frp", FRPServer: "127.0.0.1:7000"}, false, nil,
			"frp tunnel: a token is required (EVALFLOW_FRP_TOKEN or --interception.frp.token-file)"},
		{"frp with empty token file", Interception{Type: "frp", FRPServer: "frps.example", FRPTokenFile: emptyToken}, true, nil,
			"frp token file " + emptyToken + " is empty"},
		{"ssh without known hosts or key", Interception{Type: "ssh", SSHServer: "h:22", SSHUser: "u", SSHKnownHosts: "/k"}, true, nil, "key file or the agent"},
		{"remote runtime needs a tunnel", Interception{}, true, nil, "cannot reach"},
		{"unknown", Interception{Type: "ngrok"}, true, nil, "unknown type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rt harness.Runtime = &local.Runtime{}
			if tt.remote {
				rt = remoteRuntime{&local.Runtime{}}
			}
			err := tt.c.Validate()
			got, terr := tt.c.Tunnel(rt)
			if tt.wantErr != "" {
				if err == nil {
					err = terr
				}
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, terr)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestInterceptionErrorsHoldNoToken(t *testing.T) {
	c := Interception{Type: "frp", FRPServer: "frps.example:notaport", FRPToken: "sekret-token"}
	err := c.Validate()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sekret-token")
}

func TestSDKTimeoutOutlastsTheServersRetries(t *testing.T) {
	assert.Equal(t, 4*time.Minute+90*time.Second, UpstreamLimits{HeaderTimeout: time.Minute}.SDKTimeout())
	assert.Equal(t, 21*time.Minute+30*time.Second, UpstreamLimits{}.SDKTimeout(), "the default header timeout")
}
