package results

import (
	"context"
	"testing"

	"github.com/evalflow/evalflow/rollout"
	"github.com/stretchr/testify/require"
)

// A resumed run reruns failed rollouts: the rerun's record supersedes the
// failure, everywhere, while a success is never replaced.
func TestFailureIsSupersededBySuccess(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	failed := record("run", 1, 0)
	failed.Status, failed.ErrorKind, failed.Reward, failed.Attempt = rollout.StatusError, "harness_exit", 0, 1
	_, existed, err := s.Put(ctx, failed, nil)
	require.NoError(t, err)
	require.False(t, existed)

	again := failed // the same attempt replayed: still the one failure
	_, existed, err = s.Put(ctx, again, nil)
	require.NoError(t, err)
	require.True(t, existed)

	ok := record("run", 1, 0)
	ok.Attempt = 1
	got, existed, err := s.Put(ctx, ok, nil)
	require.NoError(t, err)
	require.False(t, existed, "a success supersedes a stored failure")
	require.Equal(t, rollout.StatusOK, got.Status)

	late := failed
	late.Attempt = 5
	got, existed, err = s.Put(ctx, late, nil)
	require.NoError(t, err)
	require.True(t, existed, "a success is final")
	require.Equal(t, rollout.StatusOK, got.Status)

	recs, err := s.List(ctx, "run")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, rollout.StatusOK, recs[0].Status)
	// Another process reading the log sees the same.
	other, err := Open(s.root)
	require.NoError(t, err)
	rec, found, err := other.Get(ctx, "run", ok.Key)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, rollout.StatusOK, rec.Status)
	require.Len(t, fileLines(t, s, "run"), 2, "the failure stays in the log as history")
}
