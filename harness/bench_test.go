package harness

import (
	"context"
	"testing"

	"github.com/evalflow/evalflow/tasksets"
)

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

// BenchmarkBwrapLaunch is one `true` harness in a bwrap sandbox, around a
// prepared workspace.
func BenchmarkBwrapLaunch(b *testing.B) {
	benchmarkLaunch(b, needBwrap(b))
}

// BenchmarkLocalLaunch is one `true` harness as a local subprocess, in a
// prepared workspace: the baseline of BenchmarkBwrapLaunch.
func BenchmarkLocalLaunch(b *testing.B) {
	benchmarkLaunch(b, &Local{Dir: b.TempDir()})
}

func benchmarkLaunch(b *testing.B, rt Runtime) {
	ws, err := PrepareWorkspace(b.TempDir(), tasksets.Task{ID: "bench"}, PrepareOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Remove()
	spec := Spec{Key: "bench", Command: []string{"true"}, Workspace: ws}
	for b.Loop() {
		res, err := rt.Run(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}

// BenchmarkLocalLaunchNoWorkspace is one `true` harness as a local
// subprocess in a fresh temporary workdir, as a task without a workspace
// runs: the baseline of BenchmarkPrepareWorkspace + BenchmarkLocalLaunch.
func BenchmarkLocalLaunchNoWorkspace(b *testing.B) {
	rt := &Local{Dir: b.TempDir()}
	spec := Spec{Key: "bench", Command: []string{"true"}}
	for b.Loop() {
		res, err := rt.Run(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}
