package wiring

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// stamp is the version scripts/build.sh stamps into the binaries at link
// time (-ldflags -X github.com/evalflow/evalflow/internal/wiring.stamp=…):
// git describe of the source, which holds without the VCS information a
// build from a tarball or with -buildvcs=false lacks.
var stamp string

// Version describes the running binary for --version, best first: the
// version stamped at link time, the module version (go install …@v1.2.0),
// the VCS commit the go command recorded, and failing all of them the
// binary's Go build id, which names this build and no other.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return version(stamp, bi, ownBuildID)
}

// version is Version of a binary stamped s, with build info bi (nil when
// it has none); buildID is asked only when nothing else names the build.
func version(s string, bi *debug.BuildInfo, buildID func() string) string {
	mod, commit, when, modified := "", "", "", false
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			mod = v
		}
		for _, set := range bi.Settings {
			switch set.Key {
			case "vcs.revision":
				commit = set.Value
			case "vcs.time":
				when = set.Value
			case "vcs.modified":
				modified = set.Value == "true"
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit != "" && modified {
		commit += ", modified"
	}
	switch {
	case s != "":
		return s
	case mod != "" && commit != "":
		return fmt.Sprintf("%s (commit %s)", mod, commit)
	case mod != "":
		return mod
	case commit != "" && when != "":
		return fmt.Sprintf("commit %s (%s)", commit, when)
	case commit != "":
		return "commit " + commit
	}
	if id := buildID(); id != "" {
		return fmt.Sprintf("unversioned build %s (build with scripts/build.sh or make to stamp a version)", id)
	}
	return "unversioned build (build with scripts/build.sh or make to stamp a version)"
}

// ownBuildID is the running binary's Go build id (its content part, which
// changes with every change of the program), or "" when it cannot be read.
func ownBuildID() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return buildIDOf(exe)
}

// buildIDOf reads the Go build id an ELF binary holds in its
// .note.go.buildid section, shortened to its last part.
func buildIDOf(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sec := f.Section(".note.go.buildid")
	if sec == nil {
		return ""
	}
	data, err := sec.Data()
	// The note: name size, description size, type (4 bytes each), the name
	// "Go\x00\x00", then the id.
	if err != nil || len(data) < 16 || !bytes.Equal(data[12:16], []byte("Go\x00\x00")) {
		return ""
	}
	size := int(f.ByteOrder.Uint32(data[4:8]))
	if size > len(data)-16 {
		return ""
	}
	id := string(data[16 : 16+size])
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
