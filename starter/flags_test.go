package main

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/evalflow/evalflow/internal/docscheck"
	"github.com/evalflow/evalflow/internal/wiring"
)

// Every command that runs a worker takes the worker binary's flags
// (wiring.WorkerFlags, the worker's TestFlagsAreTheSharedSet) with the same
// names and env vars, and adds only flags of its own.
func TestWorkerFlagsAreShared(t *testing.T) {
	shared := map[string]bool{}
	for _, f := range wiring.WorkerFlags() {
		shared[f.Names()[0]] = true
	}
	for _, cmd := range []*cli.Command{evalCommand(), trainCommand(), resumeCommand(), devCommand()} {
		var workerPart []cli.Flag
		seen := map[string]bool{}
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				assert.False(t, seen[n], "%s: flag --%s is defined twice", cmd.Name, n)
				seen[n] = true
			}
			if shared[f.Names()[0]] {
				workerPart = append(workerPart, f)
			}
		}
		assert.Equal(t, docscheck.FlagNames(wiring.WorkerFlags()), docscheck.FlagNames(workerPart), "%s: the worker flags", cmd.Name)
	}
	// Commands that read runs take the worker's flags that locate them, and
	// only their own output options beside.
	own := map[string][]string{"results": {"rollouts", "attempts", "exclude-flagged"}, "export": {"format", "out", "samples", "passed", "min-reward"}}
	for _, cmd := range []*cli.Command{statusCommand(), resultsCommand(), exportCommand()} {
		for _, f := range cmd.Flags {
			n := f.Names()[0]
			assert.True(t, shared[n] || slices.Contains(own[cmd.Name], n), "%s: --%s is not a worker flag of the same name", cmd.Name, n)
		}
	}
}

// urfave/cli stops reading flags at the first argument: a flag after the
// run id must be an error, never silently ignored.
func TestArgumentsAfterTheRunID(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "r1", "--address", "127.0.0.1:1"}, "--address after the run id was not read: put flags before the run id"},
		{[]string{"results", "r1", "--runs-dir=/elsewhere"}, "put flags before the run id"},
		{[]string{"resume", "r1", "--force"}, "put flags before the run id"},
		{[]string{"status", "r1", "r2"}, `unexpected argument "r2": status takes one run id`},
		{[]string{"eval", "--tasks", "3", "extra", "--rubric", "exact"}, `unexpected argument "extra": eval takes flags only`},
		{[]string{"train", "now"}, `unexpected argument "now"`},
		{[]string{"dev", "--worker=false", "x"}, `unexpected argument "x"`},
		{[]string{"status", "a;b"}, `invalid run id "a;b"`},
		{[]string{"status"}, "give a run id"},
	} {
		app := newApp()
		app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
		err := app.Run(append([]string{"starter"}, tt.args...))
		require.Error(t, err, "starter %q", tt.args)
		assert.Contains(t, err.Error(), tt.want, "starter %q", tt.args)
	}
}
