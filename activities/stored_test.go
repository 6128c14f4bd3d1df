package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/results"
)

// A stored success is always reused; a stored failure only when the run does
// not rerun failures (training resumes do).
func TestStoredReuse(t *testing.T) {
	ctx := context.Background()
	store, err := results.Open(t.TempDir())
	require.NoError(t, err)
	a := &Activities{Store: store}
	okRef := RolloutRef{RunID: "r", Index: 1}
	failRef := RolloutRef{RunID: "r", Index: 2}
	_, _, err = store.Put(ctx, results.Record{Key: okRef.Key(), RunID: "r", Index: 1, Status: StatusOK, Reward: 1}, nil)
	require.NoError(t, err)
	_, _, err = store.Put(ctx, results.Record{Key: failRef.Key(), RunID: "r", Index: 2, Status: StatusError, ErrorKind: KindHarnessExit}, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		ref  RolloutRef
		want bool
	}{
		{okRef, true},
		{failRef, true},
		{RolloutRef{RunID: "r", Index: 1, RetryFailed: true}, true},
		{RolloutRef{RunID: "r", Index: 2, RetryFailed: true}, false},
		{RolloutRef{RunID: "r", Index: 3}, false},
	} {
		s, ok, err := a.stored(ctx, tc.ref)
		require.NoError(t, err)
		require.Equal(t, tc.want, ok, "stored(%+v)", tc.ref)
		if ok {
			require.True(t, s.Reused)
			require.Equal(t, tc.ref.Key(), s.Key)
		}
	}
}
