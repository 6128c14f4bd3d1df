//go:build windows

package devserver

import "syscall"

// WSAEADDRINUSE, which the syscall package does not name.
var errAddrInUse error = syscall.Errno(10048)
