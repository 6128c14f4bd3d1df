package tunnel

import "syscall"

// frpClientProcAttr makes the client process die with its parent: the
// kernel kills it when the parent exits, however it exits. (Its stdin also
// reaches EOF then, which ends it on any system.)
func frpClientProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
