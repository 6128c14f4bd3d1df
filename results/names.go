package results

import (
	"fmt"
	"strconv"
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

// flat is key as one file name: '/' becomes '~'. The mapping is one to one
// because segments never contain '~'.
func flat(key string) string { return strings.ReplaceAll(key, "/", "~") }

// traceName is the single trace file of key, relative to the run dir: the
// layout of runs stored before attempts were kept apart, and of a record
// with no attempt number.
func traceName(key string) string {
	return "traces/" + flat(key) + ".json"
}

// attemptDir holds key's attempt traces, relative to the run dir.
func attemptDir(key string) string { return "traces/" + flat(key) }

// attemptName is the trace file of attempt n of key, relative to the run dir.
func attemptName(key string, n int) string {
	return attemptDir(key) + "/" + attemptPrefix + strconv.Itoa(n) + ".json"
}

const attemptPrefix = "attempt-"

// attemptNumber parses the attempt number out of an attempt file's base name.
func attemptNumber(base string) (int, bool) {
	digits, ok := strings.CutPrefix(base, attemptPrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, ".json")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// isTraceOf reports whether name, read from a record, is one of key's trace
// files, so that a hand-edited record cannot send a read elsewhere.
func isTraceOf(key, name string) bool {
	if name == traceName(key) {
		return true
	}
	base, ok := strings.CutPrefix(name, attemptDir(key)+"/")
	if !ok {
		return false
	}
	_, ok = attemptNumber(base)
	return ok
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
