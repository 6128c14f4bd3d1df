package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/results"
	"github.com/evalflow/evalflow/rollout"
)

// A stored success is always reused; a stored failure only when the run does
// not rerun failures (training resumes do).
func TestStoredReuse(t *testing.T) {
	ctx := context.Background()
	store, err := results.Open(t.TempDir())
	require.NoError(t, err)
	a := &Activities{Store: store}
	okRef := rollout.Ref{RunID: "r", Index: 1}
	failRef := rollout.Ref{RunID: "r", Index: 2}
	_, _, err = store.Put(ctx, results.Record{Key: okRef.Key(), RunID: "r", Index: 1, Status: rollout.StatusOK, Reward: 1}, nil)
	require.NoError(t, err)
	_, _, err = store.Put(ctx, results.Record{Key: failRef.Key(), RunID: "r", Index: 2, Status: rollout.StatusError, ErrorKind: rollout.KindHarnessExit}, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		ref  rollout.Ref
		want bool
	}{
		{okRef, true},
		{failRef, true},
		{rollout.Ref{RunID: "r", Index: 1, RetryFailed: true}, true},
		{rollout.Ref{RunID: "r", Index: 2, RetryFailed: true}, false},
		{rollout.Ref{RunID: "r", Index: 3}, false},
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
