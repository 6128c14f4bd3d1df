package tunnel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel"
)

// TestFRPValidate: an frps port reached without a token lets anyone who
// reaches it register proxies, so a token is required; tests against a
// loopback frps may go without one, explicitly.
func TestFRPValidate(t *testing.T) {
	tests := []struct {
		name string
		f    tunnel.FRP
		want string // "" is valid
	}{
		{"token", tunnel.FRP{ServerAddr: "frps.example", Token: "t"}, ""},
		{"no server", tunnel.FRP{Token: "t"}, "server address is required"},
		{"bad port", tunnel.FRP{ServerAddr: "frps.example", ServerPort: 70000, Token: "t"}, "not a TCP port"},
		{"no token", tunnel.FRP{ServerAddr: "frps.example"}, "frp tunnel: a token is required"},
		{"no token on loopback", tunnel.FRP{ServerAddr: "127.0.0.1"}, "frp tunnel: a token is required"},
		{"allowed empty on IPv4 loopback", tunnel.FRP{ServerAddr: "127.0.0.1", AllowEmptyToken: true}, ""},
		{"allowed empty on IPv6 loopback", tunnel.FRP{ServerAddr: "::1", AllowEmptyToken: true}, ""},
		{"allowed empty on a name", tunnel.FRP{ServerAddr: "localhost", AllowEmptyToken: true}, `loopback address, not "localhost"`},
		{"allowed empty elsewhere", tunnel.FRP{ServerAddr: "frps.example", AllowEmptyToken: true}, `loopback address, not "frps.example"`},
		{"allowed empty on a LAN address", tunnel.FRP{ServerAddr: "10.0.0.7", AllowEmptyToken: true}, `loopback address, not "10.0.0.7"`},
		{"allowed empty on all interfaces", tunnel.FRP{ServerAddr: "0.0.0.0", AllowEmptyToken: true}, `loopback address, not "0.0.0.0"`},
	}
	for _, tt := range tests {
		err := tt.f.Validate()
		if tt.want == "" {
			assert.NoError(t, err, "%s: Validate()", tt.name)
			continue
		}
		if assert.Error(t, err, "%s: Validate()", tt.name) {
			assert.Contains(t, err.Error(), tt.want, "%s: Validate()", tt.name)
		}
	}
}

// TestFRPExposeWithoutToken fails before any client process starts.
func TestFRPExposeWithoutToken(t *testing.T) {
	f := &tunnel.FRP{ServerAddr: "frps.example", Retry: tunnel.Retry{Attempts: 1}}
	_, err := f.Expose(context.Background(), "127.0.0.1", 1)
	require.Error(t, err)
	assert.True(t, tunnel.IsError(err), "Expose = %T, want *tunnel.Error", err)
	assert.Contains(t, err.Error(), "a token is required")
}
