package local

import (
	"context"
	"testing"

	"github.com/evalflow/evalflow/harness"
	"github.com/evalflow/evalflow/tasksets"
)

// BenchmarkBwrapLaunch is one `true` harness in a bwrap sandbox, around a
// prepared workspace.
func BenchmarkBwrapLaunch(b *testing.B) {
	benchmarkLaunch(b, needBwrap(b))
}

// BenchmarkLocalLaunch is one `true` harness as a local subprocess, in a
// prepared workspace: the baseline of BenchmarkBwrapLaunch.
func BenchmarkLocalLaunch(b *testing.B) {
	benchmarkLaunch(b, &Runtime{Dir: b.TempDir()})
}

func benchmarkLaunch(b *testing.B, rt harness.Runtime) {
	ws, err := harness.PrepareWorkspace(b.TempDir(), tasksets.Task{ID: "bench"}, harness.PrepareOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Remove()
	spec := harness.Spec{Key: "bench", Command: []string{"true"}, Workspace: ws}
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
	rt := &Runtime{Dir: b.TempDir()}
	spec := harness.Spec{Key: "bench", Command: []string{"true"}}
	for b.Loop() {
		res, err := rt.Run(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}
