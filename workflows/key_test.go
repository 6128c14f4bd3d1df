package workflows

import (
	"fmt"
	"strings"
)

// sscanKey parses run/epoch/index/k.
func sscanKey(key string, run *string, epoch *int, index *int64, k *int) (int, error) {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return 0, fmt.Errorf("key %q has no run", key)
	}
	*run = key[:i]
	return fmt.Sscanf(key[i+1:], "%d/%d/%d", epoch, index, k)
}
