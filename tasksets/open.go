package tasksets

import (
	"fmt"
	"os"
	"strings"
)

// Refs Open understands besides file paths, for help texts.
const refHelp = "sample, arithmetic[?seed=N&size=N], harbor-sample, a path to a .jsonl file or a directory of task directories (harbor:path)"

// Open resolves a taskset reference:
//
//	sample                       the bundled sample (256 word problems)
//	arithmetic?seed=7&size=100   generated arithmetic; infinite without size
//	harbor-sample                the bundled Harbor tasks (extracted to a cache dir)
//	path/to/tasks.jsonl          a JSONL file (a regular file), read lazily
//	path/to/dir, harbor:path     a directory of Harbor task directories
//
// A result that holds a file implements io.Closer; callers should close it.
func Open(ref string) (Taskset, error) {
	if dir, ok := strings.CutPrefix(ref, "harbor:"); ok {
		return OpenHarbor(dir)
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
	case HarborSampleName:
		if query != "" {
			return nil, fmt.Errorf("taskset %s takes no parameters, got %q", HarborSampleName, query)
		}
		return HarborSample()
	}
	if fi, err := os.Stat(ref); err == nil && fi.IsDir() {
		return OpenHarbor(ref)
	}
	if strings.HasSuffix(ref, ".jsonl") || strings.ContainsRune(ref, '/') {
		return OpenFile(ref)
	}
	return nil, fmt.Errorf("unknown taskset %q (want %s)", ref, refHelp)
}
