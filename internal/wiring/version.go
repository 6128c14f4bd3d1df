package wiring

import (
	"fmt"
	"runtime/debug"
)

// Version describes the running binary for --version: the module version and
// the VCS commit it was built from, each "devel" when the build does not say.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	mod, commit, modified := "devel", "devel", false
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			mod = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if modified {
		commit += ", modified"
	}
	return fmt.Sprintf("%s (commit %s)", mod, commit)
}
