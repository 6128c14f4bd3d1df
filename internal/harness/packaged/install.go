package packaged

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// installedMark is written last into a complete installation.
const installedMark = ".evalflow-installed"

// DefaultCacheDir is where harnesses are installed when no directory is
// given: $XDG_CACHE_HOME/evalflow/harnesses (~/.cache/evalflow/harnesses).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("packaged harnesses: no cache directory: %w", err)
	}
	return filepath.Join(dir, "evalflow", "harnesses"), nil
}

// Installer installs packaged harnesses from the npm registry into a cache
// directory, each version once: <Dir>/<name>@<version>. An installation is
// made in a temporary directory beside it and renamed into place when
// complete, under a lock file, so that workers sharing the cache (threads,
// processes) install a version once and never see half of one.
type Installer struct {
	// Dir is the cache; "" is DefaultCacheDir.
	Dir string
	// NPM is the npm program; "" is npm on PATH.
	NPM string
	// Env holds extra KEY=VALUE entries for npm (npm_config_registry, …),
	// after this process's environment.
	Env []string

	mu    sync.Mutex
	ready map[string]*install
}

// install is one version's installation in this process.
type install struct {
	done chan struct{}
	bin  string
	err  error
}

// Install returns the path of h's program at version, installing it first
// when the cache lacks it. Concurrent calls for one version share one
// installation; a failed one is tried again by the next call.
func (in *Installer) Install(ctx context.Context, h Harness, version string) (string, error) {
	key := h.Name + "@" + version
	in.mu.Lock()
	if in.ready == nil {
		in.ready = make(map[string]*install)
	}
	cur, ok := in.ready[key]
	if !ok {
		cur = &install{done: make(chan struct{})}
		in.ready[key] = cur
		go func() {
			// Not bound to one caller's context: others may wait on it.
			cur.bin, cur.err = in.install(context.WithoutCancel(ctx), h, version)
			if cur.err != nil {
				in.mu.Lock()
				delete(in.ready, key)
				in.mu.Unlock()
			}
			close(cur.done)
		}()
	}
	in.mu.Unlock()
	select {
	case <-cur.done:
		return cur.bin, cur.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// install installs h at version into the cache, under its lock file.
func (in *Installer) install(ctx context.Context, h Harness, version string) (string, error) {
	dir := in.Dir
	if dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("packaged harness cache: %w", err)
	}
	final := filepath.Join(dir, h.Name+"@"+version)
	bin := filepath.Join(final, "node_modules", ".bin", h.Bin)
	if installed(final) {
		return bin, nil
	}
	unlock, err := lockFile(ctx, final+".lock")
	if err != nil {
		return "", fmt.Errorf("packaged harness cache: %w", err)
	}
	defer unlock()
	if installed(final) { // installed by another process while we waited
		return bin, nil
	}
	// Under the lock, a temporary directory of this version is one an
	// installer killed half-way left behind.
	if stale, err := filepath.Glob(filepath.Join(dir, "."+h.Name+"@"+version+".tmp-*")); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}
	tmp, err := os.MkdirTemp(dir, "."+h.Name+"@"+version+".tmp-")
	if err != nil {
		return "", fmt.Errorf("packaged harness cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := in.npmInstall(ctx, tmp, h.Package+"@"+version); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(tmp, "node_modules", ".bin", h.Bin)); err != nil {
		return "", fmt.Errorf("install %s: npm installed %s@%s but not its program %s", h.Name, h.Package, version, h.Bin)
	}
	if err := os.WriteFile(filepath.Join(tmp, installedMark), []byte(h.Package+"@"+version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("packaged harness cache: %w", err)
	}
	// A directory left by an installation that died half-way has no mark.
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("packaged harness cache: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("packaged harness cache: %w", err)
	}
	return bin, nil
}

// npmInstall runs npm install of spec into prefix.
func (in *Installer) npmInstall(ctx context.Context, prefix, spec string) error {
	npm := in.NPM
	if npm == "" {
		npm = "npm"
	}
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", prefix, "--no-audit", "--no-fund",
		"--no-package-lock", "--no-save", "--loglevel", "error", spec)
	cmd.Dir = prefix
	cmd.Env = append(os.Environ(), in.Env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("install %s: npm is not installed (packaged harnesses are installed with npm from its registry): %w", spec, err)
	case err != nil:
		return fmt.Errorf("install %s: npm install failed (%w) — is the npm registry (%s) reachable from this worker? npm said: %s",
			spec, err, in.registry(), lastLines(out.String(), 6))
	}
	return nil
}

// registry is the npm registry npm uses, for error messages.
func (in *Installer) registry() string {
	for _, kv := range slices.Backward(append(os.Environ(), in.Env...)) {
		if name, v, _ := strings.Cut(kv, "="); strings.EqualFold(name, "npm_config_registry") {
			return v
		}
	}
	return "the registry of npm's configuration, by default https://registry.npmjs.org"
}

// lastLines is the last n non-empty lines of s, on one line.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// installed reports whether dir holds a complete installation.
func installed(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, installedMark))
	return err == nil
}

// lockFile takes an exclusive lock on path (created if missing), waiting
// for other holders, processes included, until ctx is done.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	wait := 10 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// Another installer holds it; poll, so that ctx can end the wait.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the install lock %s: %w", path, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
