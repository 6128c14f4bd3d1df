package results

import (
	"fmt"
	"strings"
)

// maxName bounds a run id or key so every file name stays under the usual
// 255-byte limit.
const maxName = 200

// validSegment reports whether s can be a run id or one segment of a key: it
// can name nothing outside its directory and contains no '~', which stands for
// '/' in trace file names.
func validSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.ContainsRune("-_.:@+=", c):
		default:
			return false
		}
	}
	return true
}

func checkRunID(runID string) error {
	if len(runID) > maxName || !validSegment(runID) {
		return fmt.Errorf("invalid run id %q", runID)
	}
	return nil
}

func checkKey(key string) error {
	if len(key) > maxName {
		return fmt.Errorf("invalid rollout key %q: too long", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if !validSegment(seg) {
			return fmt.Errorf("invalid rollout key %q", key)
		}
	}
	return nil
}

// traceName is the trace file of key, relative to the run dir. The mapping is
// one to one because segments never contain '~'.
func traceName(key string) string {
	return "traces/" + strings.ReplaceAll(key, "/", "~") + ".json"
}

// ValidateRunID reports whether runID can name a run in the store, with the
// rule every store method applies: callers check a run id before a run
// starts rather than have each of its writes refused.
func ValidateRunID(runID string) error {
	if err := checkRunID(runID); err != nil {
		return fmt.Errorf("%w: use at most %d letters, digits and -_.:@+= (not \".\" or \"..\")", err, maxName)
	}
	return nil
}
