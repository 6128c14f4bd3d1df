package tunnel_test

import (
	"os"
	"testing"

	"github.com/evalflow/evalflow/tunnel"
	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// TestMain lets this test binary run as the frp client process of the FRP
// tunnels it tests, and as frps.
func TestMain(m *testing.M) {
	tunnel.ServeFRPClientIfAsked()
	tunneltest.ServeFRPSIfAsked()
	os.Exit(m.Run())
}
