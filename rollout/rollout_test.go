package rollout_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/evalflow/evalflow/rollout"
)

func TestKey(t *testing.T) {
	ref := rollout.Ref{RunID: "run-1", Epoch: 2, Index: 17, K: 3}
	assert.Equal(t, "run-1/2/17/3", ref.Key())
	assert.Equal(t, ref.Key(), rollout.Key("run-1", 2, 17, 3))
}

func TestActivityNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range rollout.Activities {
		assert.False(t, seen[a.Name], "activity %s listed twice", a.Name)
		seen[a.Name] = true
	}
}
