package tasksets

import (
	"fmt"
	"strings"
)

// Refs Open understands besides file paths, for help texts.
const refHelp = "sample, arithmetic[?seed=N&size=N], or a path to a .jsonl file"

// Open resolves a taskset reference:
//
//	sample                       the bundled sample (256 word problems)
//	arithmetic?seed=7&size=100   generated arithmetic; infinite without size
//	path/to/tasks.jsonl          a JSONL file (a regular file), read lazily
//
// A result that holds a file implements io.Closer; callers should close it.
func Open(ref string) (Taskset, error) {
	if strings.HasSuffix(ref, ".jsonl") || strings.ContainsRune(ref, '/') {
		return OpenFile(ref)
	}
	name, query, _ := strings.Cut(ref, "?")
	switch name {
	case "sample":
		if query != "" {
			return nil, fmt.Errorf("taskset sample takes no parameters, got %q", query)
		}
		return Sample()
	case "arithmetic":
		return parseArithmetic(query)
	}
	return nil, fmt.Errorf("unknown taskset %q (want %s)", ref, refHelp)
}
