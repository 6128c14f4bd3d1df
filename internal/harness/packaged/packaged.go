// Package packaged runs the coding agents people evaluate — OpenAI's codex
// and Anthropic's claude-code — as harnesses: each installed once per
// worker from the npm registry at a pinned version into a cache, given a
// configuration of its own that points it at the rollout's interception
// slot, run headless in the rollout's workdir, its final answer captured
// the way the env contract expects and its session logs kept in the trace.
//
// A run names a packaged harness by a command of one word,
// "packaged:<name>@<version>" (Command); Runtime recognises it and turns it
// into the real command line, and passes every other command to the
// runtime it wraps.
package packaged

import (
	"fmt"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/harness"
)

// Prefix marks a harness command that names a packaged harness.
const Prefix = "packaged:"

// Harness is a coding agent distributed as an npm package.
type Harness struct {
	// Name is what --harness calls it.
	Name string
	// Package is the npm package, Bin the program it installs.
	Package, Bin string
	// Version is the pinned default version.
	Version string
	// setup writes the harness's configuration into session (a fresh
	// directory of its own, outside the workspace) and returns its command
	// line and extra environment; bin is the installed program.
	setup func(bin, session string, spec harness.Spec) (command, env []string, err error)
	// native is the glob, under the installation, of the harness's native
	// program for a Go architecture: what runs in a sandbox without Node.
	native func(goarch string) string
	// answer reads the final answer from session when the harness does not
	// write EVALFLOW_ANSWER_FILE itself; nil when it does.
	answer func(session string) (string, error)
	// logs are the directories of session (relative) holding its session
	// logs and transcripts, and files holding its structured output.
	logs []string
}

// Harnesses are the packaged harnesses, by name.
var Harnesses = []Harness{Codex, ClaudeCode}

// Names lists the packaged harnesses' names.
func Names() []string {
	var names []string
	for _, h := range Harnesses {
		names = append(names, h.Name)
	}
	return names
}

// Lookup returns the packaged harness called name.
func Lookup(name string) (Harness, bool) {
	i := slices.IndexFunc(Harnesses, func(h Harness) bool { return h.Name == name })
	if i < 0 {
		return Harness{}, false
	}
	return Harnesses[i], true
}

// Command is the harness command of a run that uses h at version ("" is
// the pinned default).
func Command(h Harness, version string) []string {
	if version == "" {
		version = h.Version
	}
	return []string{Prefix + h.Name + "@" + version}
}

// Parse reads a Command: the harness and version it names. ok is false for
// a command that names no packaged harness; err is set for one that names
// an unknown harness or no version.
func Parse(command []string) (h Harness, version string, ok bool, err error) {
	if len(command) != 1 || !strings.HasPrefix(command[0], Prefix) {
		return Harness{}, "", false, nil
	}
	name, version, _ := strings.Cut(strings.TrimPrefix(command[0], Prefix), "@")
	h, found := Lookup(name)
	switch {
	case !found:
		return Harness{}, "", true, fmt.Errorf("unknown packaged harness %q (want one of %s)", name, strings.Join(Names(), ", "))
	case version == "":
		return Harness{}, "", true, fmt.Errorf("packaged harness %q names no version", command[0])
	}
	return h, version, true, nil
}
