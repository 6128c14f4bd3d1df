package harness_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/harness"
)

// fakeDocker is a docker CLI that prints its arguments and the contract
// variables it was given, then runs the command after the image.
const fakeDocker = `#!/bin/sh
echo "args: $*"
echo "base: $OPENAI_BASE_URL"
while [ "$1" != "img:1" ]; do shift; done
shift
exec "$@"
`

func TestDockerArgv(t *testing.T) {
	d := &harness.Docker{Image: "img:1", Network: "evals", HostGateway: true, Binary: filepath.Join(t.TempDir(), "docker")}
	require.NoError(t, os.WriteFile(d.Binary, []byte(fakeDocker), 0o755))
	assert.True(t, harness.IsRemote(d))

	res, err := d.Run(context.Background(), harness.Spec{
		Key: "run/0/3/0", Command: []string{"sh", "-c", "echo hi from $0", "agent"},
		BaseURL: "http://host.docker.internal:8765", Secret: "s3cret",
	})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	args := strings.SplitN(res.Stdout, "\n", 2)[0]
	for _, want := range []string{"run --rm -i --init --name evalflow-run_0_3_0-", "-e OPENAI_API_KEY", "-e EVALFLOW_TASK_FILE", "--network evals", "--add-host host.docker.internal:host-gateway", "img:1 sh -c"} {
		assert.Contains(t, args, want)
	}
	assert.NotContains(t, args, "s3cret", "the secret is not on the command line")
	assert.Contains(t, res.Stdout, "base: http://host.docker.internal:8765/v1")
	assert.Contains(t, res.Stdout, "hi from agent")
}

func TestDockerEngine(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skip("no docker engine")
	}
	if err := exec.Command("docker", "image", "inspect", "busybox:1.36").Run(); err != nil {
		t.Skip("busybox:1.36 is not pulled")
	}
	d := &harness.Docker{Image: "busybox:1.36"}
	res, err := d.Run(context.Background(), harness.Spec{Key: "k", Command: []string{"sh", "-c", `cat "$EVALFLOW_TASK_FILE" > /dev/null && echo 7 > "$EVALFLOW_ANSWER_FILE"`}})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Equal(t, "7", res.Answer)
}
