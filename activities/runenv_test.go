package activities_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/local"
	"github.com/evalflow/evalflow/rollout"
)

// localRuntime runs the harness as a real subprocess.
func localRuntime(t *testing.T) fakeRuntime {
	l := &local.Runtime{Dir: t.TempDir()}
	return l.Run
}

// The harness process gets the run's --harness-env and the SDK timeouts
// from the worker's upstream timeout.
func TestRunGivesTheHarnessItsEnvironment(t *testing.T) {
	out := t.TempDir()
	r := newRig(t, localRuntime(t))
	r.acts.SDKTimeout = 19 * time.Minute
	ref := ref(1)
	ref.Harness.Command = []string{"sh", "-c", `env > "$OUT/env"; echo 42 > "$EVALFLOW_ANSWER_FILE"`}
	ref.Harness.Env = []string{"OUT=" + out, "AGENT_MODE=fast,careful"}

	sum, err := r.rollout(t, ref)
	require.NoError(t, err)
	assert.Equal(t, rollout.StatusOK, sum.Status)
	b, err := os.ReadFile(filepath.Join(out, "env"))
	require.NoError(t, err)
	env := string(b)
	for _, want := range []string{"OPENAI_TIMEOUT=1140\n", "OPENAI_REQUEST_TIMEOUT=1140\n", "HTTPX_TIMEOUT=1140\n", "ANTHROPIC_TIMEOUT=1140\n", "AGENT_MODE=fast,careful\n"} {
		assert.Contains(t, env, want)
	}
}

// A run whose harness env names a credential fails as configured wrongly,
// before any harness runs.
func TestRunRefusesACredentialInTheHarnessEnv(t *testing.T) {
	ran := false
	r := newRig(t, func(ctx context.Context, spec harness.Spec) (harness.Result, error) {
		ran = true
		return harness.Result{}, nil
	})
	ref := ref(1)
	ref.Harness.Env = []string{"WANDB_API_KEY=abc123"}
	_, err := r.rollout(t, ref)
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, rollout.ErrTypeConfig, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, err.Error(), "WANDB_API_KEY looks like a credential")
	assert.False(t, strings.Contains(err.Error(), "abc123"), "the value is not repeated")
	assert.False(t, ran, "no harness ran")
}
