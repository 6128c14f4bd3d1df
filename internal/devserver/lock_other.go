//go:build !unix

package devserver

// dirLock does not exclude other processes on this platform; a second server
// on the same data directory fails on its ports instead.
type dirLock struct{}

func lockDir(dir, address string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) release() error { return nil }
