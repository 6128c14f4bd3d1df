//go:build !linux

package tunnel

import "syscall"

// frpClientProcAttr is nil here: the client process ends when its stdin
// reaches EOF, which the parent's exit causes.
func frpClientProcAttr() *syscall.SysProcAttr { return nil }
