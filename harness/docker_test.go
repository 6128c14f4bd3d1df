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
	"github.com/evalflow/evalflow/tasksets"
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

// fakeDockerCLI logs each call to $EVALFLOW_TEST_DOCKER_LOG; its images
// exist once built; a container writes a reward of 1 to the directory
// mounted at /logs.
const fakeDockerCLI = `#!/bin/sh
log="$EVALFLOW_TEST_DOCKER_LOG"
case "$1" in
image) grep -q "^build .*-t $3 " "$log" 2>/dev/null; exit $? ;;
build) echo "build $*" >> "$log"; exit 0 ;;
rm) exit 0 ;;
run)
  echo "$*" >> "$log"
  prev=
  for a in "$@"; do
    case "$prev:$a" in -v:*:/logs) logs="${a%:/logs}" ;; esac
    prev="$a"
  done
  echo "workspace=$EVALFLOW_WORKSPACE tests=$EVALFLOW_TESTS mode=$MODE"
  echo 1 > "$logs/verifier/reward.txt"
  ;;
esac
`

func TestDockerWorkspace(t *testing.T) {
	dir := t.TempDir()
	d := &harness.Docker{Image: "harness:1", Binary: filepath.Join(dir, "docker")}
	require.NoError(t, os.WriteFile(d.Binary, []byte(fakeDockerCLI), 0o755))
	log := filepath.Join(dir, "log")
	t.Setenv("EVALFLOW_TEST_DOCKER_LOG", log)
	env := filepath.Join(dir, "environment")
	require.NoError(t, os.MkdirAll(filepath.Join(env, "app"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(env, "Dockerfile"), []byte("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY app/ /app/\n"), 0o644))
	tests, solution := filepath.Join(dir, "tests"), filepath.Join(dir, "solution")

	tasks := []struct {
		name  string
		task  tasksets.Task
		image string
	}{
		{"the task's image", tasksets.Task{ID: "a", Environment: env, Info: []byte(`{"environment":{"docker_image":"task:7"}}`)}, "task:7"},
		{"a build of its Dockerfile", tasksets.Task{ID: "b", Environment: env}, "evalflow-env:"},
		{"the harness image", tasksets.Task{ID: "c"}, "harness:1"},
	}
	for _, tt := range tasks {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(log))
			ws, err := harness.PrepareWorkspace(dir, tt.task, harness.PrepareOptions{})
			require.NoError(t, err)
			defer ws.Remove()
			for range 2 {
				res, err := d.Run(context.Background(), harness.Spec{Key: "r/0/1/0", Command: []string{"agent"}, Task: tt.task, Workspace: ws, Solution: solution})
				require.NoError(t, err)
				assert.Equal(t, 0, res.ExitCode, res.Stderr)
				assert.Contains(t, res.Stdout, "workspace=/app tests= ")
			}
			got, err := d.Verify(context.Background(), harness.VerifySpec{Key: "r/0/1/0", Workspace: ws, Tests: tests,
				Command: "bash /tests/test.sh", Env: map[string]string{"MODE": "strict"}})
			require.NoError(t, err)
			assert.Equal(t, 1.0, got.Reward)
			assert.Equal(t, "workspace=/app tests=/tests mode=strict\n", got.Stdout)

			b, err := os.ReadFile(log)
			require.NoError(t, err)
			calls := strings.Split(strings.TrimSpace(string(b)), "\n")
			builds := 0
			for _, c := range calls {
				if strings.HasPrefix(c, "build ") {
					builds++
					assert.Contains(t, c, env, "the build context is the environment directory")
				}
			}
			if tt.image == "evalflow-env:" {
				assert.Equal(t, 1, builds, "the image is built once and cached")
			} else {
				assert.Zero(t, builds)
			}
			runs := calls[len(calls)-3:]
			for _, c := range runs {
				assert.Contains(t, c, "-v "+ws.Dir+":/app -v "+ws.Logs+":/logs -w /app ")
				assert.Contains(t, c, " "+tt.image)
			}
			assert.Contains(t, runs[0], "-e EVALFLOW_WORKSPACE")
			assert.Contains(t, runs[0], "-v "+solution+":/solution:ro")
			assert.NotContains(t, runs[0], ":/tests", "the agent never sees the tests")
			assert.Contains(t, runs[2], "-v "+tests+":/tests:ro")
			assert.Contains(t, runs[2], "-e MODE")
			assert.NotContains(t, runs[2], "/solution")
			assert.True(t, strings.HasSuffix(runs[2], " sh -c bash /tests/test.sh"), runs[2])
		})
	}
}
