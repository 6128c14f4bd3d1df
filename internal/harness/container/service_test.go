package container_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/harness/container"
	"github.com/evalflow/evalflow/internal/harness/container/containertest"
)

// serviceLog is the entrypoint.log of a result, "" when it has none.
func serviceLog(res harness.Result) string {
	for _, l := range res.SessionLogs {
		if l.Name == container.ServiceLogName {
			return l.Content
		}
	}
	return ""
}

// The image's ENTRYPOINT and CMD run in the sandbox before the agent, as
// the engine runs them: the service task's entrypoint adds
// greeting.internal to /etc/hosts and serves a greeting there, which the
// oracle reads and the tests ask the service for again. When the keeper
// took the entrypoint's place and nothing ran it, the oracle found nothing
// answering and the task scored 0. An entrypoint that exits at once (a
// shell without a terminal) or cannot start breaks nothing.
func TestTheImagesEntrypointRuns(t *testing.T) {
	r := containertest.Runtime(t)
	cases := []struct {
		name string
		log  []string // in the trace's entrypoint.log
	}{
		{"service", []string{`"/usr/local/bin/serve.sh" "hello-from-the-entrypoint"`, "serving hello-from-the-entrypoint on 8080"}},
		{"shell-exits", []string{`"/bin/bash"`}},
		{"missing", []string{`"/no/such/program" "--serve"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := task(t, "testdata/entrypoint", c.name)
			res, v, err := attempt(t, r, tk, harness.OracleCommand(), tk.Solution)
			require.NoError(t, err)
			require.Zero(t, res.ExitCode, "oracle: %s", res.Stderr)
			assert.Equal(t, 1.0, v.Reward, "oracle: verifier said %s %s", v.Stdout, v.Stderr)
			log := serviceLog(res)
			for _, want := range c.log {
				assert.Contains(t, log, want)
			}

			res, v, err = attempt(t, r, tk, []string{"true"}, "")
			require.NoError(t, err)
			assert.Equal(t, 0.0, v.Reward, "nothing done: verifier said %s %s", v.Stdout, v.Stderr)
		})
	}
}

// An image without ENTRYPOINT or CMD runs nothing beside the keeper, and
// its trace has no entrypoint.log.
func TestNoEntrypointNoService(t *testing.T) {
	r := containertest.Runtime(t)
	tk := task(t, "testdata/tb-shaped", "state-outside-app")
	res, _, err := attempt(t, r, tk, []string{"true"}, "")
	require.NoError(t, err)
	assert.Empty(t, serviceLog(res))
}
