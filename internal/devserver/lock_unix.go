//go:build unix

package devserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// dirLock is an exclusive flock on DataDir/lock, held while a server runs.
// The file holds the holder's frontend address so a second start can say
// where to dial.
type dirLock struct {
	f *os.File
}

func lockDir(dir, address string) (*dirLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another process holds %s; dial its server with --address %s",
				ErrAlreadyRunning, dir, holderAddress(holder))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(address+"\n"), 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write lock: %w", err)
	}
	return &dirLock{f: f}, nil
}

func holderAddress(content []byte) string {
	if addr := strings.TrimSpace(string(content)); addr != "" {
		return addr
	}
	return "HOST:PORT"
}

// release unlocks by closing; the address is left behind, harmless once
// nobody holds the lock.
func (l *dirLock) release() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}
