package tasksets

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Refs Open understands besides file paths, for help texts.
const refHelp = "sample, arithmetic[?seed=N&size=N], harbor-sample, a path to a .jsonl file or a directory of task directories (harbor:path), or name@version or org/name@version (a registry dataset)"

// Open resolves a taskset reference:
//
//	sample                       the bundled sample (256 word problems)
//	arithmetic?seed=7&size=100   generated arithmetic; infinite without size
//	harbor-sample                the bundled Harbor tasks (extracted to a cache dir)
//	path/to/tasks.jsonl          a JSONL file (a regular file), read lazily
//	path/to/dir, harbor:path     a directory of Harbor task directories
//	registry:name@version#lock   a registry dataset resolved (Lock.Ref): its
//	                             tasks fetched with git into the cache
//
// A registry dataset named as name@version is refused: it is resolved
// through a registry first (ReadRegistry, Resolve), and the run carries
// the resolved reference.
//
// A result that holds a file implements io.Closer; callers should close it.
func Open(ref string) (Taskset, error) {
	if l, ok, err := ParseLock(ref); ok {
		if err != nil {
			return nil, err
		}
		// Open has no caller's context: a stalled fetch ends at a bound.
		ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		defer cancel()
		return OpenLock(ctx, l)
	}
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
	if IsDatasetRef(ref) {
		return nil, fmt.Errorf("taskset %s names a registry dataset: the starter resolves it (through --registry FILE|URL, %s, or Harbor's registry) before a worker opens it", ref, RegistryEnv)
	}
	if strings.HasSuffix(ref, ".jsonl") || strings.ContainsRune(ref, '/') {
		return OpenFile(ref)
	}
	return nil, fmt.Errorf("unknown taskset %q (want %s)", ref, refHelp)
}
