package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

// buildContext writes a build context holding dockerfile (if not empty),
// a.txt, b.txt, src/main.sh (executable), src/lib/util.sh and the link
// src/run -> main.sh.
func buildContext(t *testing.T, dockerfile string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "environment")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", "lib"), 0o755))
	files := map[string]string{"a.txt": "A\n", "b.txt": "B\n", "src/main.sh": "echo main\n", "src/lib/util.sh": "echo util\n"}
	if dockerfile != "" {
		files["Dockerfile"] = dockerfile
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(dir, "src", "main.sh"), 0o755))
	require.NoError(t, os.Symlink("main.sh", filepath.Join(dir, "src", "run")))
	return dir
}

// tree lists the files under dir as path → content ("-> target" for a
// link, "/" for a directory).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = "-> " + target
		case fi.IsDir():
			out[rel] = "/"
		default:
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[rel] = string(b)
		}
		return nil
	}))
	return out
}

// workspaceCase is a Dockerfile and the workspace it prepares.
type workspaceCase struct {
	name       string
	dockerfile string
	files      map[string]string // the workspace's tree
	mount      string
	workdir    string
	env        []string
	notes      []string
	opts       PrepareOptions
}

// srcTree is the build context's src/ directory as tree lists it.
var srcTree = map[string]string{"main.sh": "echo main\n", "lib": "/", "lib/util.sh": "echo util\n", "run": "-> main.sh"}

// dockerfileWorkspaces are the Dockerfiles TestPrepareWorkspaceDockerfile
// prepares, each with its workspace.
var dockerfileWorkspaces = []workspaceCase{
	{
		name:       "the sample layout",
		dockerfile: "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY src/ /app/\n",
		files:      srcTree,
		notes:      []string{"FROM debian:bookworm-slim: the host's system stands in for the image"},
	},
	{
		name:       "file into a directory (trailing slash)",
		dockerfile: "FROM x\nCOPY a.txt /app/sub/\n",
		files:      map[string]string{"sub": "/", "sub/a.txt": "A\n"},
	},
	{
		name:       "file to a file name",
		dockerfile: "FROM x\nCOPY a.txt /app/conf/b.cfg\n",
		files:      map[string]string{"conf": "/", "conf/b.cfg": "A\n"},
	},
	{
		name:       "file into an existing directory",
		dockerfile: "FROM x\nCOPY src /app/code\nCOPY a.txt /app/code\n",
		files:      map[string]string{"code": "/", "code/a.txt": "A\n", "code/main.sh": "echo main\n", "code/lib": "/", "code/lib/util.sh": "echo util\n", "code/run": "-> main.sh"},
	},
	{
		name:       "directory contents, not the directory",
		dockerfile: "FROM x\nCOPY src/lib /app/\n",
		files:      map[string]string{"util.sh": "echo util\n"},
	},
	{
		name:       "several sources go into the destination",
		dockerfile: "FROM x\nCOPY a.txt b.txt /app/both\n",
		files:      map[string]string{"both": "/", "both/a.txt": "A\n", "both/b.txt": "B\n"},
	},
	{
		name:       "a glob, flags ignored, the JSON form",
		dockerfile: "FROM x\nCOPY --chown=1000:1000 --chmod=600 *.txt /app/t/\nADD [\"a.txt\", \"/app/j.txt\"]\n",
		files:      map[string]string{"t": "/", "t/a.txt": "A\n", "t/b.txt": "B\n", "j.txt": "A\n"},
	},
	{
		name:       "relative destinations follow WORKDIR",
		dockerfile: "FROM x\nWORKDIR /app\nWORKDIR work\nCOPY a.txt .\nCOPY b.txt ../top/\n",
		files:      map[string]string{"work": "/", "work/a.txt": "A\n", "top": "/", "top/b.txt": "B\n"},
		workdir:    "/app/work",
	},
	{
		name:       "a WORKDIR elsewhere is the workspace",
		dockerfile: "FROM x\nWORKDIR /srv/project\nCOPY a.txt ./\nCOPY b.txt /app/\n",
		files:      map[string]string{"a.txt": "A\n"},
		mount:      "/srv/project",
		workdir:    "/srv/project",
		notes: []string{"FROM x: the host's system stands in for the image",
			"COPY b.txt /app/: /app is outside the workspace /srv/project, not copied"},
	},
	{
		name:       "outside the workspace is noted",
		dockerfile: "FROM x\nCOPY a.txt /usr/local/bin/\n",
		files:      map[string]string{},
		notes: []string{"FROM x: the host's system stands in for the image",
			"COPY a.txt /usr/local/bin/: /usr/local/bin is outside the workspace /app, not copied"},
	},
	{
		name: "ENV and ARG",
		dockerfile: "ARG BASE=debian\nFROM $BASE\nARG DEST=/app/dest\nENV A=1 B=\"two words\" \\\n    C='$A'\nENV D $A-x\n" +
			"ENV PATH=/opt/bin:$EVALFLOW_TEST_PATH KEY=${EVALFLOW_TEST_API_KEY:-none}\nCOPY a.txt ${DEST}/\n",
		files: map[string]string{"dest": "/", "dest/a.txt": "A\n"},
		env:   []string{"A=1", "B=two words", "C=$A", "D=1-x", "PATH=/opt/bin:/usr/bin:/bin", "KEY=none"},
		notes: []string{"FROM debian: the host's system stands in for the image"},
	},
	{
		name: "lines that change nothing a workspace holds are noted",
		dockerfile: "FROM debian:bookworm-slim\nLABEL a=b\nMAINTAINER me\nUSER root\nSHELL [\"/bin/bash\", \"-c\"]\n" +
			"EXPOSE 8080\nVOLUME /data\nSTOPSIGNAL SIGTERM\nHEALTHCHECK NONE\nONBUILD RUN make\nENTRYPOINT [\"sh\"]\nCMD [\"-c\", \"true\"]\n",
		files: map[string]string{},
		notes: []string{
			"FROM debian:bookworm-slim: the host's system stands in for the image",
			"LABEL a=b: skipped outside docker",
			"MAINTAINER me: skipped outside docker",
			"USER root: skipped outside docker",
			`SHELL ["/bin/bash", "-c"]: skipped outside docker`,
			"EXPOSE 8080: skipped outside docker",
			"VOLUME /data: skipped outside docker",
			"STOPSIGNAL SIGTERM: skipped outside docker",
			"HEALTHCHECK NONE: skipped outside docker",
			"ONBUILD RUN make: skipped outside docker",
			`ENTRYPOINT ["sh"]: skipped outside docker`,
			`CMD ["-c", "true"]: skipped outside docker`,
		},
	},
	{
		name: "RUN and earlier stages skipped when asked, heredocs too",
		dockerfile: "# escape=\\\nFROM debian:bookworm-slim AS base\nRUN echo skipped\n" +
			"FROM debian:bookworm-slim\n# a comment\nRUN apt-get update && \\\n    # inside\n    apt-get install -y jq\n" +
			"RUN <<EOF\nCOPY a.txt /app/\nEOF\nEXPOSE 8080\nCMD [\"sh\"]\n",
		files: map[string]string{},
		opts:  PrepareOptions{SkipUnsupported: true},
		notes: []string{
			"1 earlier build stage(s): skipped outside docker",
			"FROM debian:bookworm-slim: the host's system stands in for the image",
			"RUN apt-get update && apt-get install -y jq: not run outside docker",
			"RUN <<EOF: not run outside docker",
			"EXPOSE 8080: skipped outside docker",
			`CMD ["sh"]: skipped outside docker`,
		},
	},
	{
		name:       "no Dockerfile: the files as they are",
		dockerfile: "",
		files: map[string]string{"a.txt": "A\n", "b.txt": "B\n", "src": "/", "src/main.sh": "echo main\n",
			"src/lib": "/", "src/lib/util.sh": "echo util\n", "src/run": "-> main.sh"},
	},
}

func TestPrepareWorkspaceDockerfile(t *testing.T) {
	t.Setenv("EVALFLOW_TEST_PATH", "/usr/bin:/bin")
	t.Setenv("EVALFLOW_TEST_API_KEY", "worker-secret")
	for _, tt := range dockerfileWorkspaces {
		t.Run(tt.name, func(t *testing.T) {
			env := buildContext(t, tt.dockerfile)
			ws, err := PrepareWorkspace(t.TempDir(), tasksets.Task{ID: "t", Environment: env}, tt.opts)
			require.NoError(t, err)
			defer func() { assert.NoError(t, ws.Remove()) }()

			assert.Equal(t, tt.files, tree(t, ws.Dir))
			mount, workdir := tt.mount, tt.workdir
			if mount == "" {
				mount = "/app"
			}
			if workdir == "" {
				workdir = mount
			}
			assert.Equal(t, mount, ws.Mount())
			assert.Equal(t, workdir, ws.Workdir())
			assert.DirExists(t, ws.HostWorkdir())
			assert.Equal(t, tt.env, ws.Env)
			if tt.notes != nil {
				assert.Equal(t, tt.notes, ws.Notes)
			}
			assert.DirExists(t, filepath.Join(ws.Logs, "verifier"))
			assert.DirExists(t, filepath.Join(ws.Logs, "agent"))
			if fi, err := os.Stat(filepath.Join(ws.Dir, "main.sh")); err == nil {
				assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "permissions are kept")
			}
		})
	}
}

func TestPrepareWorkspaceRefuses(t *testing.T) {
	tests := []struct {
		name       string
		dockerfile string
		setup      func(t *testing.T, ctx string)
		want       string
	}{
		{"a link out of the context, copied", "FROM x\nCOPY src/ /app/\n", func(t *testing.T, ctx string) {
			require.NoError(t, os.Symlink("../../outside", filepath.Join(ctx, "src", "escape")))
		}, "src/escape is a symbolic link pointing outside the build context"},
		{"an absolute link", "", func(t *testing.T, ctx string) {
			require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(ctx, "passwd")))
		}, "passwd is a symbolic link pointing outside the build context"},
		{"a source that is a link out", "FROM x\nCOPY secret /app/\n", func(t *testing.T, ctx string) {
			require.NoError(t, os.WriteFile(filepath.Join(ctx, "..", "secret.txt"), []byte("s"), 0o644))
			require.NoError(t, os.Symlink("../secret.txt", filepath.Join(ctx, "secret")))
		}, "secret points outside the build context"},
		{"a source outside", "FROM x\nCOPY ../secret.txt /app/\n", func(t *testing.T, ctx string) {
			require.NoError(t, os.WriteFile(filepath.Join(ctx, "..", "secret.txt"), []byte("s"), 0o644))
		}, "points outside the build context"},
		{"a link out of the directory copied", "FROM x\nCOPY src/lib /app/\n", func(t *testing.T, ctx string) {
			require.NoError(t, os.Symlink("../main.sh", filepath.Join(ctx, "src", "lib", "up")))
		}, "src/lib/up is a symbolic link pointing outside the directory copied"},
		{"a FIFO", "", func(t *testing.T, ctx string) {
			require.NoError(t, syscall.Mkfifo(filepath.Join(ctx, "pipe"), 0o600))
		}, "pipe is a named pipe (FIFO)"},
		{"a missing source", "FROM x\nCOPY nope/ /app/\n", nil, "source nope/: not in the build context"},
		{"COPY without a destination", "FROM x\nCOPY a.txt\n", nil, "Dockerfile line 2: COPY needs a source and a destination"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := buildContext(t, tt.dockerfile)
			if tt.setup != nil {
				tt.setup(t, ctx)
			}
			parent := t.TempDir()
			_, err := PrepareWorkspace(parent, tasksets.Task{ID: "bad-task", Environment: ctx}, PrepareOptions{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "task bad-task")
			assert.Contains(t, err.Error(), tt.want)
			entries, err := os.ReadDir(parent)
			require.NoError(t, err)
			assert.Empty(t, entries, "a failed workspace is removed")
		})
	}
}

// A line only a container engine carries out refuses the task, naming it
// and the line, unless such lines are skipped: then it is a note.
func TestPrepareWorkspaceUnsupported(t *testing.T) {
	tests := []struct {
		name       string
		dockerfile string
		compose    string // a compose file's name, written beside the Dockerfile
		want       UnsupportedError
		note       string // under SkipUnsupported
	}{
		{
			name:       "RUN",
			dockerfile: "FROM debian:bookworm-slim\nWORKDIR /app\nRUN apt-get install -y jq\nCOPY a.txt ./\n",
			want:       UnsupportedError{Line: 3, Instruction: "RUN apt-get install -y jq", Reason: "RUN is not run outside a container engine"},
			note:       "RUN apt-get install -y jq: not run outside docker",
		},
		{
			name:       "RUN over continuation lines names its first",
			dockerfile: "FROM x\n\n# set up\nRUN apt-get update && \\\n    apt-get install -y jq\n",
			want:       UnsupportedError{Line: 4, Instruction: "RUN apt-get update && apt-get install -y jq", Reason: "RUN is not run outside a container engine"},
			note:       "RUN apt-get update && apt-get install -y jq: not run outside docker",
		},
		{
			name:       "an earlier build stage",
			dockerfile: "ARG GO=1.22\nFROM golang:${GO} AS build\nCOPY src /src\nFROM debian:bookworm-slim\nCOPY a.txt /app/\n",
			want: UnsupportedError{Line: 2, Instruction: "FROM golang:${GO} AS build",
				Reason: "build stages before the last are not built outside a container engine"},
			note: "1 earlier build stage(s): skipped outside docker",
		},
		{
			name:       "COPY --from",
			dockerfile: "FROM debian:bookworm-slim\nCOPY a.txt /app/\nCOPY --from=busybox:1 /bin/busybox /app/\n",
			want: UnsupportedError{Line: 3, Instruction: "COPY --from=busybox:1 /bin/busybox /app/",
				Reason: "COPY --from copies from another image or stage, which is not built outside a container engine"},
			note: "COPY --from=busybox:1 /bin/busybox /app/: copies from another image or stage, skipped outside docker",
		},
		{
			name:       "ADD of a URL",
			dockerfile: "FROM x\nADD https://example.com/data.tar.gz /app/\n",
			want: UnsupportedError{Line: 2, Instruction: "ADD https://example.com/data.tar.gz /app/",
				Reason: "ADD of a URL or a git repository is not fetched outside a container engine"},
			note: "ADD https://example.com/data.tar.gz: not fetched outside docker",
		},
		{
			name:       "ADD of a git repository",
			dockerfile: "FROM x\nADD a.txt git@github.com:o/r.git /app/src/\n",
			want: UnsupportedError{Line: 2, Instruction: "ADD a.txt git@github.com:o/r.git /app/src/",
				Reason: "ADD of a URL or a git repository is not fetched outside a container engine"},
			note: "ADD git@github.com:o/r.git: not fetched outside docker",
		},
		{
			name:       "a compose file",
			dockerfile: "FROM x\nCOPY a.txt /app/\n",
			compose:    "docker-compose.yaml",
			want:       UnsupportedError{Instruction: "docker-compose.yaml", Reason: MultiContainerReason},
			note:       "docker-compose.yaml: a multi-container task, run here as its Dockerfile's one container",
		},
		{
			name:    "a compose file without a Dockerfile",
			compose: "docker-compose.yml",
			want:    UnsupportedError{Instruction: "docker-compose.yml", Reason: MultiContainerReason},
			note:    "docker-compose.yml: a multi-container task, run here as its Dockerfile's one container",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := buildContext(t, tt.dockerfile)
			if tt.compose != "" {
				require.NoError(t, os.WriteFile(filepath.Join(env, tt.compose), []byte("services: {db: {image: postgres}}\n"), 0o644))
			}
			task := tasksets.Task{ID: "needs-docker", Environment: env}
			parent := t.TempDir()
			_, err := PrepareWorkspace(parent, task, PrepareOptions{})
			var unsupported *UnsupportedError
			require.ErrorAs(t, err, &unsupported, "PrepareWorkspace(%s) = %v, want an *UnsupportedError", tt.name, err)
			want := tt.want
			want.Task = "needs-docker"
			assert.Equal(t, &want, unsupported)
			entries, err := os.ReadDir(parent)
			require.NoError(t, err)
			assert.Empty(t, entries, "a refused workspace is removed")

			ws, err := PrepareWorkspace(parent, task, PrepareOptions{SkipUnsupported: true})
			require.NoError(t, err)
			defer func() { assert.NoError(t, ws.Remove()) }()
			assert.Contains(t, ws.Notes, tt.note)
		})
	}
}

// Only a docker-compose.yaml (or .yml) at the top of the environment
// makes a task multi-container: one among the task's data elsewhere, or
// under another name, is a file like any other.
func TestComposeFileElsewhereIsData(t *testing.T) {
	task := t.TempDir()
	env := filepath.Join(task, "environment")
	for _, f := range []string{"environment/app/docker-compose.yml", "environment/compose.yaml", "tests/docker-compose.yaml"} {
		p := filepath.Join(task, filepath.FromSlash(f))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("services: {db: {image: postgres}}\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(env, "Dockerfile"), []byte("FROM x\nWORKDIR /app\nCOPY app/ ./\n"), 0o644))
	assert.Empty(t, ComposeFile(env))

	ws, err := PrepareWorkspace(t.TempDir(), tasksets.Task{ID: "data", Environment: env, Tests: filepath.Join(task, "tests")}, PrepareOptions{})
	require.NoError(t, err, "a compose file among the task's data does not refuse it")
	defer ws.Remove()
	assert.FileExists(t, filepath.Join(ws.Dir, "docker-compose.yml"), "copied into the workspace as data")

	for _, name := range []string{"docker-compose.yaml", "docker-compose.yml"} {
		require.NoError(t, os.WriteFile(filepath.Join(env, name), []byte("services: {}\n"), 0o644))
		assert.Equal(t, name, ComposeFile(env))
		require.NoError(t, os.Remove(filepath.Join(env, name)))
	}
}

func TestUnsupportedErrorSaysWhatToDo(t *testing.T) {
	line := &UnsupportedError{Task: "hello", Line: 3, Instruction: "RUN apt-get install -y jq", Reason: "RUN is not run outside a container engine"}
	assert.Equal(t, "task hello: Dockerfile line 3: RUN apt-get install -y jq: RUN is not run outside a container engine; "+
		"run the task in the docker runtime, or pass --runtime.skip-unsupported to skip such lines", line.Error())
	compose := &UnsupportedError{Task: "X", Instruction: "docker-compose.yaml", Reason: MultiContainerReason}
	assert.Equal(t, "task X: docker-compose.yaml: a multi-container task (its environment is a compose file's services): only the docker runtime runs its services; "+
		"pass --runtime.skip-unsupported to run the task without them", compose.Error())
}

func TestPrepareWorkspaceEmpty(t *testing.T) {
	ws, err := PrepareWorkspace("", tasksets.Task{ID: "t", Info: []byte(`{"environment":{"docker_image":"img:2"}}`)}, PrepareOptions{})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(ws.Dir, os.TempDir()), "parent \"\" is the temp dir")
	assert.Empty(t, tree(t, ws.Dir))
	assert.Equal(t, "img:2", ws.image)
	assert.Empty(t, ws.Notes)

	// Read-only leftovers do not defeat Remove.
	ro := filepath.Join(ws.Dir, "ro", "sub")
	require.NoError(t, os.MkdirAll(ro, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ro, "f"), nil, 0o644))
	require.NoError(t, os.Chmod(ro, 0o500))
	require.NoError(t, os.Chmod(filepath.Dir(ro), 0o500))
	require.NoError(t, ws.Remove())
	assert.NoDirExists(t, ws.root)
}

// BenchmarkPrepareWorkspace is the workspace cost of one rollout of a
// bundled task: PrepareWorkspace (its Dockerfile's COPY) and Remove.
func BenchmarkPrepareWorkspace(b *testing.B) {
	ts, err := tasksets.HarborSample()
	if err != nil {
		b.Fatal(err)
	}
	task, err := ts.Task(context.Background(), 0)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for b.Loop() {
		ws, err := PrepareWorkspace(dir, task, PrepareOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := ws.Remove(); err != nil {
			b.Fatal(err)
		}
	}
}
