package tasksets

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys of Harbor's [environment] that evalflow does not carry out are
// named: in a warning when the task runs well without them, in a refusal
// when it cannot.
func TestHarborKeysEvalflowDoesNotHonour(t *testing.T) {
	var task Task
	require.NoError(t, parseHarborConfig([]byte("[environment]\ncpus = 2\nstorage_mb = 10240\nskills_dir = \"/skills\"\ngpu_types = []\n"), t.TempDir(), &task))
	assert.Equal(t, []string{
		"[environment] skills_dir is not honoured: no harness here is given the task's skills",
		"[environment] storage_mb is not honoured: no runtime here limits a sandbox's disk",
	}, task.Warnings)

	task = Task{}
	require.NoError(t, parseHarborConfig([]byte("[environment]\ncpus = 2\nmemory_mb = 2048\n"), t.TempDir(), &task))
	assert.Empty(t, task.Warnings, "keys evalflow honours warn of nothing")

	err := parseHarborConfig([]byte("[environment]\ngpus = 1\ngpu_types = [\"H100\"]\n"), t.TempDir(), &Task{})
	require.Error(t, err)
	assert.Equal(t, "[environment] gpu_types = [H100] cannot be met: no runtime here gives a sandbox a GPU, of any type", err.Error())
}
