package activities

import (
	"sync"

	"github.com/evalflow/evalflow/tasksets"
	"github.com/evalflow/evalflow/tasksets/tables"
)

// TasksetCache opens each taskset once per worker. Tasksets are read-only
// and index-addressable, so one open copy serves every rollout.
type TasksetCache struct {
	mu   sync.Mutex
	open map[string]tasksets.Taskset
}

// Open returns the taskset for ref, opening it on first use.
func (c *TasksetCache) Open(ref string) (tasksets.Taskset, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts, ok := c.open[ref]; ok {
		return ts, nil
	}
	// A table (CSV, Parquet, a saved Hugging Face dataset), else the
	// other kinds tasksets.Open knows.
	ts, ok, err := tables.Open(ref)
	if !ok {
		ts, err = tasksets.Open(ref)
	}
	if err != nil {
		return nil, err
	}
	if c.open == nil {
		c.open = make(map[string]tasksets.Taskset)
	}
	c.open[ref] = ts
	return ts, nil
}
