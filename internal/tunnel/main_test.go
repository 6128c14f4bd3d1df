package tunnel_test

import (
	"os"
	"testing"

	"github.com/evalflow/evalflow/internal/tunnel"
	"github.com/evalflow/evalflow/internal/tunnel/tunneltest"
)

// TestMain lets this test binary run as the frp client process of the FRP
// tunnels it tests, and as frps.
func TestMain(m *testing.M) {
	tunnel.ServeFRPClientIfAsked()
	tunneltest.ServeFRPSIfAsked()
	os.Exit(m.Run())
}
