package engine_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/internal/engine/enginetest"
)

// started is a running container of the base image, removed at the end.
func started(t *testing.T, c *engine.Client, cfg engine.ContainerConfig) string {
	t.Helper()
	ctx := context.Background()
	if cfg.Image == "" {
		cfg.Image = enginetest.BaseImage
	}
	if cfg.Cmd == nil {
		cfg.Cmd = []string{"sleep", "600"}
	}
	cfg.Labels = map[string]string{"evalflow.test": t.Name()}
	id, err := c.CreateContainer(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.RemoveContainer(context.Background(), id)) })
	require.NoError(t, c.StartContainer(ctx, id))
	return id
}

func TestExecExitCodesAndOutput(t *testing.T) {
	c := enginetest.Client(t)
	id := started(t, c, engine.ContainerConfig{HostConfig: engine.HostConfig{NetworkMode: "none"}})
	ctx := context.Background()
	var out, errb bytes.Buffer
	code, err := c.Exec(ctx, id, engine.ExecConfig{
		Cmd: []string{"sh", "-c", `echo "out $GREETING"; echo err >&2; pwd; exit 7`},
		Env: []string{"GREETING=hi"}, WorkingDir: "/tmp",
	}, &out, &errb)
	require.NoError(t, err)
	assert.Equal(t, 7, code, "the exit code comes from the engine")
	assert.Equal(t, "out hi\n/tmp\n", out.String())
	assert.Equal(t, "err\n", errb.String())

	code, err = c.Exec(ctx, id, engine.ExecConfig{Cmd: []string{"true"}}, nil, nil)
	require.NoError(t, err)
	assert.Zero(t, code)

	// A large output crosses many frames intact.
	out.Reset()
	code, err = c.Exec(ctx, id, engine.ExecConfig{Cmd: []string{"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x"}}, &out, nil)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, strings.Repeat("x", 300000), out.String())
}

func TestCopyInAndOut(t *testing.T) {
	c := enginetest.Client(t)
	id := started(t, c, engine.ContainerConfig{HostConfig: engine.HostConfig{NetworkMode: "none"}})
	ctx := context.Background()
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "sub", "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	require.NoError(t, os.Symlink("sub/run.sh", filepath.Join(src, "link")))
	require.NoError(t, c.CopyDirIn(ctx, id, src, "/tests"))

	var out bytes.Buffer
	code, err := c.Exec(ctx, id, engine.ExecConfig{Cmd: []string{"sh", "-c", "/tests/link && stat -c %a /tests/sub/run.sh"}}, &out, nil)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "ran\n755\n", out.String())

	rc, err := c.CopyOut(ctx, id, "/tests/sub/run.sh")
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, "run.sh", hdr.Name)
	data, err := io.ReadAll(tr)
	require.NoError(t, err)
	assert.Equal(t, "#!/bin/sh\necho ran\n", string(data))
}

func TestListByLabelAndRemove(t *testing.T) {
	c := enginetest.Client(t)
	ctx := context.Background()
	id := started(t, c, engine.ContainerConfig{HostConfig: engine.HostConfig{NetworkMode: "none"}})
	list, err := c.ListContainers(ctx, "evalflow.test="+t.Name())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)

	ct, err := c.InspectContainer(ctx, id)
	require.NoError(t, err)
	assert.True(t, ct.State.Running)
	assert.Equal(t, t.Name(), ct.Config.Labels["evalflow.test"])

	require.NoError(t, c.RemoveContainer(ctx, id))
	require.NoError(t, c.RemoveContainer(ctx, id), "removing a removed container is no error")
	_, err = c.InspectContainer(ctx, id)
	assert.True(t, engine.IsNotFound(err), "got %v", err)
	list, err = c.ListContainers(ctx, "evalflow.test="+t.Name())
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestBuildFromContext(t *testing.T) {
	c := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(
		"FROM debian:bookworm-slim\nARG WHO=world\nWORKDIR /srv/app\nCOPY [\"greeting file.txt\", \"/srv/app/\"]\nRUN echo \"hello $WHO\" > /etc/greeting\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greeting file.txt"), []byte("hi"), 0o644))
	var ctxTar bytes.Buffer
	require.NoError(t, engine.TarDir(&ctxTar, dir, ""))
	tag := "localhost/evalflow-test/build:" + strings.ToLower(t.Name())
	var log bytes.Buffer
	require.NoError(t, c.Build(ctx, &ctxTar, engine.BuildOptions{Tag: tag, HostNetwork: true, Output: &log}))
	t.Cleanup(func() { _ = c.RemoveImage(context.Background(), tag) })
	assert.Contains(t, log.String(), "RUN echo")

	img, err := c.InspectImage(ctx, tag)
	require.NoError(t, err)
	assert.Equal(t, "/srv/app", img.Config.WorkingDir)

	id := started(t, c, engine.ContainerConfig{Image: tag, HostConfig: engine.HostConfig{NetworkMode: "none"}})
	var out bytes.Buffer
	code, err := c.Exec(ctx, id, engine.ExecConfig{Cmd: []string{"sh", "-c", "cat /etc/greeting 'greeting file.txt'; pwd"}}, &out, nil)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "hello world\nhi/srv/app\n", out.String())

	// A failing RUN line is the build's error, not the engine's.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM debian:bookworm-slim\nRUN exit 3\n"), 0o644))
	ctxTar.Reset()
	require.NoError(t, engine.TarDir(&ctxTar, dir, ""))
	err = c.Build(ctx, &ctxTar, engine.BuildOptions{Tag: tag + "-bad"})
	var be *engine.BuildError
	require.ErrorAs(t, err, &be)
}

func TestUnreachableEngine(t *testing.T) {
	c, err := engine.New("unix://" + filepath.Join(t.TempDir(), "none.sock"))
	require.NoError(t, err)
	_, err = c.Version(context.Background())
	var ue *engine.UnavailableError
	require.ErrorAs(t, err, &ue)
	_, err = engine.New("ssh://host")
	require.Error(t, err)
}
