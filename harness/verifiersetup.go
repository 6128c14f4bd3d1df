package harness

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/evalflow/evalflow/tasksets"
)

// Verifier modes a task may ask for in [verifier] environment_mode.
const (
	// VerifierShared grades in the agent's sandbox as the agent left it
	// (Harbor's default).
	VerifierShared = "shared"
	// VerifierSeparate grades in a fresh sandbox of the verifier's own,
	// fed only the task's declared artifacts.
	VerifierSeparate = "separate"
)

// ArtifactsDir is always carried to a separate verifier: where agents
// leave what they want graded or kept.
const ArtifactsDir = "/logs/artifacts"

// VerifierSetup is how a task's verifier is to run: its [verifier]
// environment_mode, its [verifier.environment] and the task's top-level
// artifacts.
type VerifierSetup struct {
	Mode string
	// Environment is [verifier.environment]; nil runs a separate verifier
	// in a fresh sandbox of the task's own environment.
	Environment *Environment
	// Artifacts are the absolute paths copied from the agent's sandbox to
	// a separate verifier's, each at the same path.
	Artifacts []string
}

// Separate reports whether the verifier runs in a sandbox of its own.
func (v VerifierSetup) Separate() bool { return v.Mode == VerifierSeparate }

// VerifierSetupOf reads a task's verifier setup from its info; a mode or
// an artifact it cannot take is an error naming the task and the key.
func VerifierSetupOf(task tasksets.Task) (VerifierSetup, error) {
	setup := VerifierSetup{Mode: VerifierShared}
	if len(task.Info) == 0 {
		return setup, nil
	}
	var info struct {
		Verifier struct {
			Mode        *string      `json:"environment_mode"`
			Environment *Environment `json:"environment"`
		} `json:"verifier"`
		Artifacts []json.RawMessage `json:"artifacts"`
	}
	if err := json.Unmarshal(task.Info, &info); err != nil {
		// Info that is not an object carries no verifier setup.
		return setup, nil
	}
	if m := info.Verifier.Mode; m != nil {
		if *m != VerifierShared && *m != VerifierSeparate {
			return setup, fmt.Errorf("task %s: [verifier] environment_mode %q: want %q or %q", task.ID, *m, VerifierShared, VerifierSeparate)
		}
		setup.Mode = *m
	}
	setup.Environment = info.Verifier.Environment
	for i, raw := range info.Artifacts {
		// An entry is a path, or a table whose source is one.
		var p string
		if json.Unmarshal(raw, &p) != nil {
			var entry struct {
				Source string `json:"source"`
			}
			if json.Unmarshal(raw, &entry) != nil || entry.Source == "" {
				return setup, fmt.Errorf("task %s: artifacts[%d]: want a path or a table with a source", task.ID, i)
			}
			p = entry.Source
		}
		if !path.IsAbs(p) || path.Clean(p) == "/" {
			return setup, fmt.Errorf("task %s: artifacts[%d] %q: want an absolute path below /", task.ID, i, p)
		}
		setup.Artifacts = append(setup.Artifacts, path.Clean(p))
	}
	return setup, nil
}
