package results

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEpochsAndGroups(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	done, err := s.Epochs(ctx, "run")
	require.NoError(t, err)
	require.Empty(t, done)
	require.NoError(t, s.WriteEpoch(ctx, "run", 10, map[string]int{"rollouts": 4}))
	require.NoError(t, s.WriteEpoch(ctx, "run", 2, map[string]int{"rollouts": 3}))
	done, err = s.Epochs(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, []int{2, 10}, done, "numeric order")
	var got map[string]int
	require.NoError(t, s.ReadEpoch(ctx, "run", 2, &got))
	require.Equal(t, 3, got["rollouts"])

	g := Group{Key: GroupKey("run", 1, 7), Epoch: 1, Index: 7, Rewards: []float64{1, 0}, Mean: 0.5}
	_, existed, err := s.PutGroup(ctx, "run", g)
	require.NoError(t, err)
	require.False(t, existed)
	g2 := g
	g2.Mean = 0.9
	stored, existed, err := s.PutGroup(ctx, "run", g2)
	require.NoError(t, err)
	require.True(t, existed)
	require.Equal(t, 0.5, stored.Mean, "a group is written once")
	_, _, err = s.PutGroup(ctx, "run", Group{Key: "run/../x"})
	require.Error(t, err)
}
