//go:build unix

package tunnel

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f, released when f is closed.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

// ownedByMe refuses a directory another user owns: a bucket another user
// can write is no bound.
func ownedByMe(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not this user (%d)", st.Uid, uid)
	}
	return nil
}
