package activities_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/rollout"
)

// answering is a harness that makes one model call, then answers with
// answer, or the task's reference answer when answer is "".
func answering(answer string) fakeRuntime {
	return func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		if _, err := callModel(ctx, spec); err != nil {
			return harness.Result{}, err
		}
		if answer == "" {
			answer = spec.Task.Answer
		}
		return harness.Result{Answer: answer}, nil
	}
}

// mockProvider is the offline mock model behind the providers client of a
// dialect, as a worker without a configured provider has it.
func mockProvider(t *testing.T, dialect string) *providers.Client {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	c, err := providers.New(dialect, srv.URL+"/v1", "")
	require.NoError(t, err)
	return c
}

// A judge part asks the worker's provider in the provider's own dialect:
// the mock grades the answer against the reference, the grade is a metric
// of the record, and the judge's call is a turn of its own in the trace.
func TestRunJudgesThroughTheProvider(t *testing.T) {
	for _, dialect := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		for _, tt := range []struct {
			answer string
			reward float64
			grade  string
		}{
			{"", 1, "Score: 10/10"},
			{"I do not know.", 0, "Score: 0/10"},
		} {
			up := mockProvider(t, dialect)
			r := newRigWith(t, up, answering(tt.answer))
			r.acts.Judge = up
			in := ref(1)
			in.Rubric = "contains*0.5 + judge*0.5"
			s, err := r.rollout(t, in)
			require.NoError(t, err, dialect)
			assert.Equal(t, rollout.StatusOK, s.Status, dialect)
			assert.Equal(t, tt.reward, s.Reward, "%s: answer %q", dialect, tt.answer)

			ctx := context.Background()
			rec, ok, err := r.store.Get(ctx, "run", in.Key())
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, map[string]float64{"contains": tt.reward, "judge": tt.reward}, rec.Metrics, "%s: answer %q", dialect, tt.answer)

			tr, err := r.store.Trace(ctx, "run", in.Key())
			require.NoError(t, err)
			assert.Len(t, tr.Turns, 1, "%s: the agent's turns are the agent's", dialect)
			require.Len(t, tr.Judge, 1, dialect)
			turn := tr.Judge[0]
			assert.Equal(t, dialect, turn.Dialect)
			assert.Equal(t, "judge", turn.Route)
			assert.Equal(t, 200, turn.Status)
			assert.Equal(t, "mock", turn.Request.Model, "%s: the judge asks the run's model by default", dialect)
			assert.Contains(t, turn.Request.Messages[0].Text(), "## Reference answer", dialect)
			assert.Contains(t, turn.Response.Message.Text(), tt.grade, dialect)
			assert.Contains(t, tr.Score, "judge "+map[float64]string{1: "1", 0: "0"}[tt.reward]+": ", dialect)
		}
	}
}

// writeScript writes an executable shell script and returns its path.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "check.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

func TestRunStoresACommandsMetrics(t *testing.T) {
	r := newRig(t, answering(""))
	in := ref(1)
	in.Rubric = "numeric*0.5 + command:" + writeScript(t, `echo '{"reward": 0.5, "lint": 2}'`+"\n") + "*0.5"
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, 0.75, s.Reward)
	rec, ok, err := r.store.Get(context.Background(), "run", in.Key())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]float64{"numeric": 1, "command": 0.5, "command.lint": 2}, rec.Metrics)
}

// A command that fails is the rubric's error, retried by the workflow:
// nothing is recorded as the agent's reward, and the attempt's trace keeps
// why.
func TestRunRubricErrorIsRetriedNotScored(t *testing.T) {
	r := newRig(t, answering(""))
	in := ref(1)
	in.Rubric = "exact*0.5 + command:" + writeScript(t, "echo 'grader crashed' >&2\nexit 2\n") + "*0.5"
	_, err := r.rollout(t, in)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeRubric, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "the workflow retries it")
	assert.Contains(t, err.Error(), "rubric command: exit status 2; stderr: grader crashed")

	ctx := context.Background()
	_, ok, err := r.store.Get(ctx, "run", in.Key())
	require.NoError(t, err)
	assert.False(t, ok, "no record: the rollout has no reward")
	all, err := r.store.Attempts(ctx, "run", in.Key())
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Contains(t, all[0].Error, "grader crashed")
	assert.Len(t, all[0].Rollout.Turns, 1, "the attempt's turns are kept")
}

// The agent's own failure is recorded as it is; its rubric does not run.
func TestRunDoesNotScoreAnAgentFailure(t *testing.T) {
	r := newRig(t, func(context.Context, harness.Spec) (harness.Result, error) {
		return harness.Result{ExitCode: 1, Stderr: "Traceback: boom"}, nil
	})
	marker := filepath.Join(t.TempDir(), "ran")
	in := ref(1)
	in.Rubric = "command:" + writeScript(t, "touch "+marker+"\necho 1\n")
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusError, s.Status)
	assert.Equal(t, rollout.KindHarnessExit, s.ErrorKind)
	assert.NoFileExists(t, marker, "the rubric ran for a failed rollout")
}

// A judge part on a worker that has no provider to ask cannot work: the
// run fails at once.
func TestRunJudgeWithoutAProviderIsAConfigError(t *testing.T) {
	r := newRig(t, answering(""))
	in := ref(1)
	in.Rubric = "judge"
	_, err := r.rollout(t, in)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "rubric judge: this worker has no judge model to ask")
}

// A rubric's command never sees the worker's credentials.
func TestRunCommandGetsNoCredentials(t *testing.T) {
	t.Setenv("GRADER_TEST_API_KEY", "sk-worker-key")
	t.Setenv("GRADER_TEST_SETTING", "kept")
	r := newRig(t, answering(""))
	in := ref(1)
	in.Rubric = "command:" + writeScript(t, `if [ -z "$GRADER_TEST_API_KEY" ] && [ "$GRADER_TEST_SETTING" = kept ]; then echo 1; else echo 0; fi`+"\n")
	s, err := r.rollout(t, in)
	require.NoError(t, err)
	assert.Equal(t, 1.0, s.Reward, "the command saw the key, or lost the other variables")
}
