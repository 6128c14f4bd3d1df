package tunnel_test

import (
	"os"
	"testing"

	"github.com/evalflow/evalflow/tunnel/tunneltest"
)

func TestMain(m *testing.M) {
	tunneltest.ServeFRPSIfAsked()
	os.Exit(m.Run())
}
