package interception_test

import (
	"os"
	"testing"

	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

// TestMain lets tunneltest run frps as a child of this test binary.
func TestMain(m *testing.M) {
	tunneltest.ServeFRPSIfAsked()
	os.Exit(m.Run())
}
