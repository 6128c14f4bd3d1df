//go:build unix

package devserver

import "syscall"

var errAddrInUse error = syscall.EADDRINUSE
