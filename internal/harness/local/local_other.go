//go:build !linux

package local

import (
	"os/exec"
	"syscall"
)

// harnessProcAttr puts the harness in process group pgid. Without Pdeathsig
// here, only the supervisor ends it when the worker dies.
func harnessProcAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
}

func startHarness(cmd *exec.Cmd) error { return cmd.Start() }
