package container

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/internal/engine"
	"github.com/evalflow/evalflow/tasksets"
)

// DefaultBuildTimeout bounds an image build whose task sets no
// build_timeout_sec.
const DefaultBuildTimeout = 30 * time.Minute

// buildOutputLimit bounds the build output kept in a trace.
const buildOutputLimit = 64 << 10

// buildTailLines is how many of a failed build's last lines its error
// shows.
const buildTailLines = 20

// BuildLogName is the name of an image build's output in a rollout's
// trace.
const BuildLogName = "image-build.log"

// build is one image build, shared by the rollouts that wait for it.
type build struct {
	done chan struct{}
	err  error
	// log is the build's output (its last buildOutputLimit bytes); fresh
	// says this runtime ran the build rather than finding the image.
	log   string
	fresh bool
	// logged is set once an attempt's trace holds the log.
	logged atomic.Bool
}

// traceLog is the build's output for the trace of an attempt that uses
// its image: a failed build's for every attempt, a successful one's for
// the first only (nil: none).
func (b *build) traceLog() []harness.SessionLog {
	if b == nil || b.log == "" || (b.err == nil && b.logged.Swap(true)) {
		return nil
	}
	return []harness.SessionLog{{Name: BuildLogName, Content: b.log}}
}

// imageFor is the image a rollout's sandbox starts from: the task's
// docker_image as given, else a build of its Dockerfile (tagged by a hash
// of the build context, built once), else Image. built is the build of
// the image, when it is one (its output for the trace). An image that
// cannot be had because of the task (a failed build, a missing image not
// to be pulled) is a *harness.ConfigError naming the task.
func (r *Runtime) imageFor(ctx context.Context, task tasksets.Task, ws *harness.Workspace, env harness.Environment) (image string, built *build, err error) {
	switch {
	case ws.Image() != "":
		return ws.Image(), nil, r.ensure(ctx, task, ws.Image())
	case ws.BuildContext() != "":
		return r.build(ctx, task, ws.BuildContext(), env)
	}
	image = r.Image
	if image == "" {
		image = DefaultImage
	}
	return image, nil, r.ensure(ctx, task, image)
}

// Prepare builds (or finds) the image of a task ahead of its rollouts, so
// that a Dockerfile that does not build is shown before a run fans out.
func (r *Runtime) Prepare(ctx context.Context, task tasksets.Task) error {
	ws, err := r.PrepareWorkspace("", task)
	if err != nil {
		return err
	}
	defer ws.Remove()
	env, err := harness.EnvironmentOf(task)
	if err != nil {
		return harness.TaskConfigError(task.ID, err)
	}
	if harness.ComposeFile(task.Environment) != "" {
		return r.prepareCompose(ctx, task, env) // compose_run.go
	}
	_, _, err = r.imageFor(ctx, task, ws, env)
	return err
}

// ensure makes sure the engine holds image, pulling it when allowed.
func (r *Runtime) ensure(ctx context.Context, task tasksets.Task, image string) error {
	_, err := r.Engine.InspectImage(ctx, image)
	if err == nil || !engine.IsNotFound(err) {
		return err
	}
	if r.Pull == PullNever {
		return harness.TaskConfigError(task.ID, fmt.Errorf("task %s: image %s is not on the engine, and --runtime.pull is never", task.ID, image))
	}
	var out bytes.Buffer
	if err := r.Engine.Pull(ctx, image, &out); err != nil {
		var ue *engine.UnavailableError
		if errors.As(err, &ue) || ctx.Err() != nil {
			return err
		}
		return harness.TaskConfigError(task.ID, fmt.Errorf("task %s: pull image %s: %w", task.ID, image, err))
	}
	return nil
}

// build builds the task's environment directory once per content.
func (r *Runtime) build(ctx context.Context, task tasksets.Task, dir string, env harness.Environment) (tag string, b *build, err error) {
	sum, err := hashTree(dir)
	if err != nil {
		return "", nil, fmt.Errorf("hash the environment of task %s: %w", task.ID, err)
	}
	tag = r.imageRepo() + "/" + imageName(task.ID) + ":" + sum[:16]
	for {
		b = &build{done: make(chan struct{})}
		got, loaded := r.images.LoadOrStore(tag, b)
		if loaded {
			b = got.(*build)
			select {
			case <-b.done:
			case <-ctx.Done():
				return "", nil, ctx.Err()
			}
			if b.err == nil {
				return tag, b, nil
			}
			if errors.As(b.err, new(*harness.ConfigError)) {
				return "", b, b.err
			}
			// The engine failed the other build: try again.
			r.images.CompareAndDelete(tag, b)
			continue
		}
		b.fresh, b.log, b.err = r.buildOnce(ctx, task, dir, tag, env)
		close(b.done)
		if b.err == nil && b.fresh {
			r.pruneAfterBuild(ctx)
		}
		if b.err != nil && !errors.As(b.err, new(*harness.ConfigError)) {
			r.images.CompareAndDelete(tag, b)
		}
		if b.err != nil {
			return "", b, b.err
		}
		return tag, b, nil
	}
}

// pruneAfterBuild keeps the task images within KeepImages once a build
// added one; a failure to prune is logged, never the rollout's.
func (r *Runtime) pruneAfterBuild(ctx context.Context) {
	keep := r.KeepImages
	if keep == 0 {
		keep = DefaultKeepImages
	}
	if keep < 0 {
		return
	}
	removed, err := r.PruneImages(ctx, keep, 0)
	if err != nil {
		r.logger().Warn("prune the task images", "error", err)
	}
	for _, img := range removed {
		r.logger().Info("removed a task image beyond the ones kept", "image", img.Name, "keep", keep)
	}
}

// buildOnce builds the image tag from dir unless the engine holds it
// already (fresh is false then). log is the build's output; a failed
// build's error ends with its last lines.
func (r *Runtime) buildOnce(ctx context.Context, task tasksets.Task, dir, tag string, env harness.Environment) (fresh bool, log string, err error) {
	if _, err := r.Engine.InspectImage(ctx, tag); err == nil {
		return false, "", nil
	} else if !engine.IsNotFound(err) {
		return false, "", err
	}
	timeout := DefaultBuildTimeout
	if env.BuildTimeoutSec > 0 {
		timeout = time.Duration(env.BuildTimeoutSec * float64(time.Second))
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(engine.TarDir(pw, dir, "")) }()
	out := &buildOutput{tail: harness.NewTail(buildOutputLimit)}
	r.logger().Info("building a task's image", "task", task.ID, "image", tag)
	err = r.Engine.Build(bctx, pr, engine.BuildOptions{
		Tag: tag, HostNetwork: true, Output: out,
		Labels: map[string]string{labelSandbox: "image", "evalflow.task": task.ID},
	})
	pr.CloseWithError(io.ErrClosedPipe)
	log = out.String()
	var be *engine.BuildError
	switch {
	case errors.As(err, &be):
		return true, log, harness.TaskConfigError(task.ID, fmt.Errorf("task %s: the image of %s does not build: %s%s", task.ID, filepath.Join(dir, "Dockerfile"), be.Message, lastLines(log, buildTailLines)))
	case err != nil && ctx.Err() == nil && bctx.Err() != nil:
		return true, log, harness.TaskConfigError(task.ID, fmt.Errorf("task %s: the image build took longer than its build_timeout_sec (%v)%s", task.ID, timeout, lastLines(log, buildTailLines)))
	case err != nil:
		return true, log, fmt.Errorf("build the image of task %s: %w", task.ID, err)
	}
	return true, log, nil
}

// buildOutput keeps the last bytes of a build's output and says when
// earlier ones were left out.
type buildOutput struct {
	tail harness.Tail
	n    atomic.Int64
}

func (o *buildOutput) Write(p []byte) (int, error) {
	o.n.Add(int64(len(p)))
	return o.tail.Write(p)
}

func (o *buildOutput) String() string {
	s := o.tail.String()
	if o.n.Load() > buildOutputLimit {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = fmt.Sprintf("[the build's first %d bytes are left out]\n", o.n.Load()-int64(len(s))) + s
	}
	return s
}

// lastLines is the last n non-empty lines of log, each on a line of its
// own after a line saying what they are; "" for a log without any.
func lastLines(log string, n int) string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if l = strings.TrimRight(l, " \t\r"); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	lines = lines[max(0, len(lines)-n):]
	return "; the build's last lines:\n  " + strings.Join(lines, "\n  ")
}

// imageName is a task ID as an image repository name: lower case letters,
// digits, dots, dashes and underscores.
func imageName(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), ".-_")
	if name == "" {
		return "task"
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// hashTree hashes the names, modes, link targets and contents under dir:
// the build context's identity, whatever its files' times.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", link)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
