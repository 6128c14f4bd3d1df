package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// HostLimiter is a token bucket shared by every process of a host that
// names the same file: the host's tunnel creations, whatever the number of
// workers on it. The file holds the tokens left and when they were last
// refilled; each draw locks it (flock), refills it for the time passed and
// takes a token. A bucket holds a minute's budget at most and refills it
// evenly over a minute. Processes sharing a file should share PerMinute:
// each refills at its own rate.
type HostLimiter struct {
	// Path is the bucket's state file; empty is DefaultLimitFile().
	Path string
	// PerMinute is the budget; <= 0 is DefaultCreationsPerMinute.
	PerMinute int
	// Now is the clock of the bucket's arithmetic; nil is time.Now. Tests
	// compress time with it.
	Now func() time.Time
}

// NewHostLimiter returns a bucket of perMinute creations a minute kept in
// path (empty: DefaultLimitFile()).
func NewHostLimiter(path string, perMinute int) *HostLimiter {
	return &HostLimiter{Path: path, PerMinute: perMinute}
}

// DefaultLimitFile is where the workers of a user on a host keep their
// shared bucket: $XDG_RUNTIME_DIR/evalflow/tunnel-limit, else
// /tmp/evalflow-<uid>/tunnel-limit.
func DefaultLimitFile() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "evalflow", "tunnel-limit")
	}
	return filepath.Join(os.TempDir(), "evalflow-"+strconv.Itoa(os.Getuid()), "tunnel-limit")
}

// bucketState is the file's content.
type bucketState struct {
	Tokens float64 `json:"tokens"`
	// Refilled is when Tokens was last brought up to date, in Unix
	// nanoseconds.
	Refilled int64 `json:"refilled_unix_nano"`
}

// Wait blocks until the host's bucket gives a token or ctx is done.
func (h *HostLimiter) Wait(ctx context.Context) error {
	for {
		wait, err := h.Take()
		if err != nil {
			return err
		}
		if wait == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("tunnel creation rate limit: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Take takes a token when the bucket has one (wait is 0), else reports how
// long until it has one; it never blocks on the budget, only on the lock.
func (h *HostLimiter) Take() (wait time.Duration, err error) {
	path := h.Path
	if path == "" {
		path = DefaultLimitFile()
	}
	f, err := openBucket(path)
	if err != nil {
		return 0, fmt.Errorf("tunnel creation limit %s: %w", path, err)
	}
	defer f.Close()
	if err := lockFile(f); err != nil {
		return 0, fmt.Errorf("tunnel creation limit %s: lock: %w", path, err)
	}
	// Closing the file releases the lock.
	wait, err = h.draw(f)
	if err != nil {
		return 0, fmt.Errorf("tunnel creation limit %s: %w", path, err)
	}
	return wait, nil
}

// draw does the bucket's arithmetic on the locked file f.
func (h *HostLimiter) draw(f *os.File) (time.Duration, error) {
	perMinute := h.PerMinute
	if perMinute <= 0 {
		perMinute = DefaultCreationsPerMinute
	}
	capacity := float64(perMinute)
	perNano := capacity / float64(time.Minute)
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	t := now().UnixNano()

	b, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	st := bucketState{Tokens: capacity, Refilled: t} // a new bucket is full
	if len(b) > 0 {
		// A file that does not parse (a process that died between
		// truncating and writing it) starts a full bucket rather than
		// stopping every worker of the host.
		if err := json.Unmarshal(b, &st); err != nil {
			st = bucketState{Tokens: capacity, Refilled: t}
		}
	}
	if elapsed := t - st.Refilled; elapsed > 0 {
		st.Tokens += float64(elapsed) * perNano
		st.Refilled = t
	} else if elapsed < 0 {
		st.Refilled = t // the clock went back: no refill, none owed
	}
	st.Tokens = min(st.Tokens, capacity)
	var wait time.Duration
	if st.Tokens >= 1 {
		st.Tokens--
	} else {
		wait = max(time.Duration(math.Ceil((1-st.Tokens)/perNano)), time.Millisecond)
	}
	out, err := json.Marshal(st)
	if err != nil {
		return 0, err
	}
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(out, 0); err != nil {
		return 0, err
	}
	return wait, nil
}

// openBucket opens (creating) the state file, its directory private to
// this user.
func openBucket(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errors.New(dir + " is not a directory")
	}
	if err := ownedByMe(fi); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
