package results

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/rollout"
	"github.com/evalflow/evalflow/trace"
)

func attemptTrace(key string, exit int) *trace.Rollout {
	return &trace.Rollout{Key: key, TaskID: "task-1", Harness: trace.Harness{ExitCode: exit}}
}

// A retried rollout keeps every attempt's trace: the failed attempt's file is
// not replaced by the retry's, and an attempt cut short by the infrastructure
// keeps its turns and its error without adding a record.
func TestEveryAttemptKeepsItsTrace(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	key := rollout.Key("run", 0, 1, 0)

	infra, err := s.PutAttempt(ctx, "run", Attempt{N: 1, Error: "tunnel lost during the rollout",
		Rollout: trace.Rollout{Key: key, Turns: []trace.Turn{{Index: 0, Status: 200}}}})
	require.NoError(t, err)
	assert.Equal(t, 1, infra.N)
	assert.Equal(t, "traces/run~0~1~0/attempt-1.json", infra.File)
	_, ok, err := s.Get(ctx, "run", key)
	require.NoError(t, err)
	assert.False(t, ok, "an attempt without a result adds no record")

	failed := record("run", 1, 0)
	failed.Status, failed.ErrorKind, failed.Reward, failed.Attempt = rollout.StatusError, rollout.KindHarnessExit, 0, 2
	got, _, err := s.Put(ctx, failed, attemptTrace(key, 3))
	require.NoError(t, err)
	assert.Equal(t, "traces/run~0~1~0/attempt-2.json", got.Trace)

	ok3 := record("run", 1, 0)
	ok3.Attempt = 3
	got, existed, err := s.Put(ctx, ok3, attemptTrace(key, 0))
	require.NoError(t, err)
	require.False(t, existed)
	assert.Equal(t, "traces/run~0~1~0/attempt-3.json", got.Trace, "the record names its own attempt's trace")

	// Each line of the log still reads its own attempt's trace.
	lines := fileLines(t, s, "run")
	require.Len(t, lines, 2)
	var first trace.Rollout
	require.NoError(t, readJSON(filepath.Join(s.Dir("run"), lines[0].Trace), &first))
	assert.Equal(t, 3, first.Harness.ExitCode, "the failed attempt's trace survives its retry")

	final, err := s.Trace(ctx, "run", key)
	require.NoError(t, err)
	assert.Equal(t, 0, final.Harness.ExitCode, "Trace is the final attempt's")

	all, err := s.Attempts(ctx, "run", key)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for i, at := range all {
		assert.Equal(t, i+1, at.N)
		assert.Equal(t, attemptName(key, i+1), at.File)
		assert.Equal(t, key, at.Key)
	}
	assert.Equal(t, "tunnel lost during the rollout", all[0].Error)
	assert.Len(t, all[0].Turns, 1, "the infrastructure failure keeps the turns it saw")
	assert.Equal(t, 3, all[1].Harness.ExitCode)
	assert.Empty(t, all[2].Error)

	// A stored success is final: a late duplicate writes nothing.
	late := record("run", 1, 0)
	late.Attempt = 4
	_, existed, err = s.Put(ctx, late, attemptTrace(key, 0))
	require.NoError(t, err)
	assert.True(t, existed)
	all, err = s.Attempts(ctx, "run", key)
	require.NoError(t, err)
	assert.Len(t, all, 3)

	none, err := s.Attempts(ctx, "run", rollout.Key("run", 0, 2, 0))
	require.NoError(t, err)
	assert.Empty(t, none)
}

// A resumed run numbers its attempts from 1 again: its attempts are stored
// past those of the earlier run, never over them, and its failure is the
// rollout's latest record.
func TestResumedAttemptsDoNotReplaceEarlierOnes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	key := rollout.Key("run", 0, 4, 0)
	failed := record("run", 4, 0)
	failed.Status, failed.ErrorKind, failed.Reward, failed.Attempt = rollout.StatusError, rollout.KindTimeout, 0, 1
	_, _, err = s.Put(ctx, failed, attemptTrace(key, -1))
	require.NoError(t, err)

	rerun := failed
	rerun.ErrorKind = rollout.KindHarnessExit
	got, existed, err := s.Put(ctx, rerun, attemptTrace(key, 1))
	require.NoError(t, err)
	assert.False(t, existed, "a rerun's failure is a later attempt")
	assert.Equal(t, 2, got.Attempt)
	assert.Equal(t, attemptName(key, 2), got.Trace)
	stored, _, err := s.Get(ctx, "run", key)
	require.NoError(t, err)
	assert.Equal(t, rollout.KindHarnessExit, stored.ErrorKind)

	all, err := s.Attempts(ctx, "run", key)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, -1, all[0].Harness.ExitCode)
	assert.Equal(t, 1, all[1].Harness.ExitCode)
}

// Runs stored before attempts were kept apart have one trace file per
// rollout, traces/<key>.json, named by the record: they stay readable, and a
// new attempt of such a rollout is stored beside the old trace.
func TestOldTraceLayoutIsRead(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "old-run")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "traces"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, rolloutsFile), []byte(
		`{"key":"old-run/0/1/0","run_id":"old-run","epoch":0,"index":1,"k":0,"task_id":"t1","reward":1,"status":"ok","turns":1,"input_tokens":5,"output_tokens":2,"duration_ms":40,"attempt":1,"trace":"traces/old-run~0~1~0.json","finished_at":"2026-10-01T12:00:00Z"}`+"\n"+
			`{"key":"old-run/0/2/0","run_id":"old-run","epoch":0,"index":2,"k":0,"task_id":"t2","reward":0,"status":"error","error_kind":"timeout","turns":0,"input_tokens":0,"output_tokens":0,"duration_ms":40,"attempt":1,"trace":"traces/old-run~0~2~0.json","finished_at":"2026-10-01T12:00:01Z"}`+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "traces", "old-run~0~1~0.json"), []byte(
		`{"key":"old-run/0/1/0","task_id":"t1","turns":[{"index":0,"dialect":"chat","status":200}],"harness":{"exit_code":0},"reward":1}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "traces", "old-run~0~2~0.json"), []byte(
		`{"key":"old-run/0/2/0","task_id":"t2","turns":[],"harness":{"exit_code":-1,"timed_out":true},"reward":0}`), 0o644))

	s, err := Open(root)
	require.NoError(t, err)
	tr, err := s.Trace(ctx, "old-run", "old-run/0/1/0")
	require.NoError(t, err)
	assert.Equal(t, "t1", tr.TaskID)
	require.Len(t, tr.Turns, 1)
	all, err := s.Attempts(ctx, "old-run", "old-run/0/1/0")
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, 0, all[0].N, "an old trace has no attempt number")
	assert.Equal(t, "traces/old-run~0~1~0.json", all[0].File)

	// The timed-out rollout is rerun and succeeds: its old trace stays.
	rerun := Record{Key: "old-run/0/2/0", RunID: "old-run", Index: 2, TaskID: "t2", Reward: 1, Status: rollout.StatusOK, Attempt: 1}
	got, existed, err := s.Put(ctx, rerun, attemptTrace(rerun.Key, 0))
	require.NoError(t, err)
	assert.False(t, existed)
	assert.Equal(t, attemptName(rerun.Key, 1), got.Trace)
	all, err = s.Attempts(ctx, "old-run", rerun.Key)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.True(t, all[0].Harness.TimedOut)
	assert.Equal(t, "traces/old-run~0~2~0.json", all[0].File)
	assert.Equal(t, 1, all[1].N)
	tr, err = s.Trace(ctx, "old-run", rerun.Key)
	require.NoError(t, err)
	assert.False(t, tr.Harness.TimedOut, "Trace follows the record to the rerun's trace")
}

// A record is read from a file anyone may edit: its trace name must be one
// of its key's trace files.
func TestTraceRefusesAForeignFileName(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, rolloutsFile), []byte(
		`{"key":"run/0/1/0","run_id":"run","status":"ok","trace":"../../etc/passwd"}`+"\n"), 0o644))
	s, err := Open(root)
	require.NoError(t, err)
	_, err = s.Trace(ctx, "run", "run/0/1/0")
	require.ErrorContains(t, err, "not a trace of its key")
}

func TestAttemptNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		ok   bool
	}{
		{"attempt-1.json", 1, true},
		{"attempt-12.json", 12, true},
		{"attempt-.json", 0, false},
		{"attempt-1.json.tmp-3", 0, false},
		{".attempt-1.json.tmp-3", 0, false},
		{"attempt--1.json", 0, false},
		{"attempt-1a.json", 0, false},
	} {
		n, ok := attemptNumber(tc.name)
		assert.Equal(t, tc.ok, ok, "attemptNumber(%q)", tc.name)
		assert.Equal(t, tc.n, n, "attemptNumber(%q)", tc.name)
	}
	assert.True(t, isTraceOf("r/0/1/0", "traces/r~0~1~0/attempt-3.json"))
	assert.True(t, isTraceOf("r/0/1/0", "traces/r~0~1~0.json"))
	assert.False(t, isTraceOf("r/0/1/0", "traces/r~0~1~1/attempt-3.json"))
	assert.False(t, isTraceOf("r/0/1/0", "traces/r~0~1~0/../../x/attempt-3.json"))
	assert.False(t, isTraceOf("r/0/1/0", "traces/r~0~1~0/attempt-3.json/../../../x"))
}
