package tunnel

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLocalExpose(t *testing.T) {
	tests := []struct {
		host string
		port int
		want string
	}{
		{"127.0.0.1", 8080, "http://127.0.0.1:8080"},
		{"::1", 9000, "http://[::1]:9000"},
	}
	for _, tt := range tests {
		exp, err := Local{}.Expose(context.Background(), tt.host, tt.port)
		require.NoError(t, err)
		assert.Equal(t, tt.want, exp.URL(), "Expose(%q, %d).URL()", tt.host, tt.port)
		assert.NoError(t, exp.Close())
	}
	assert.Equal(t, "127.0.0.1", Local{}.BindHost())
}

func TestLocalExposeCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Local{}.Expose(ctx, "127.0.0.1", 1)
	assert.ErrorIs(t, err, context.Canceled)
}
