package tunnel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tunnel"
)

func TestCustom(t *testing.T) {
	tests := []struct {
		c       tunnel.Custom
		want    string
		wantErr bool
	}{
		{tunnel.Custom{URL: "https://evals.example.com", Port: 8765}, "https://evals.example.com", false},
		{tunnel.Custom{URL: "http://10.0.0.5:8765/", Port: 8765}, "http://10.0.0.5:8765", false},
		{tunnel.Custom{URL: "https://proxy.example/v1", Port: 9000}, "https://proxy.example", false},
		{tunnel.Custom{URL: "", Port: 8765}, "", true},
		{tunnel.Custom{URL: "ftp://x", Port: 8765}, "", true},
		{tunnel.Custom{URL: "http://x", Port: 0}, "", true},
	}
	for _, tt := range tests {
		exp, err := tt.c.Expose(context.Background(), "127.0.0.1", 1234)
		if tt.wantErr {
			assert.Error(t, err, "Expose(%+v)", tt.c)
			assert.True(t, tunnel.IsError(err))
			continue
		}
		require.NoError(t, err, "Expose(%+v)", tt.c)
		assert.Equal(t, tt.want, exp.URL(), "Expose(%+v).URL()", tt.c)
		assert.NoError(t, exp.Close())
		assert.Equal(t, "0.0.0.0", tt.c.BindHost())
		assert.Equal(t, tt.c.Port, tt.c.BindPort())
	}
}
