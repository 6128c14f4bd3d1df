package local

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// harnessProcAttr puts the harness in process group pgid and has the kernel
// SIGKILL it when its parent dies.
func harnessProcAttr(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
}

// spawner is the goroutine harnesses are started from. Pdeathsig fires when
// the thread that forked the child exits, not the process: Go ends a thread
// whenever a goroutine locked to it returns without unlocking (code that
// enters namespaces does so on purpose), and an unlocked goroutine may fork
// on any thread. So every harness is forked from this one goroutine, locked
// to its thread for the life of the process; that thread exits only with it.
var spawner struct {
	once sync.Once
	reqs chan func()
}

// startHarness starts cmd on the spawner's thread.
func startHarness(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawner.reqs {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}
