package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTasksetNameDropsTheResolvedTasks(t *testing.T) {
	for ref, want := range map[string]string{
		"registry:terminal-bench@2.0#eNqLjgUAARUAuQ": "terminal-bench@2.0",
		"sample":            "sample",
		"data/tasks.jsonl":  "data/tasks.jsonl",
		"arithmetic?seed=7": "arithmetic?seed=7",
	} {
		assert.Equal(t, want, TasksetName(ref), "TasksetName(%q)", ref)
	}
}
