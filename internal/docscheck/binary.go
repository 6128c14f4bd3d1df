package docscheck

import (
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// Binary checks the command line of one of the repository's programs
// (starter, worker), whose checkout is at root, as each program's tests
// run it: every flag is named in docs/, every command line of the docs
// that runs the program names its commands and flags, and --version names
// the program and its build.
func Binary(t *testing.T, root string, newApp func() *cli.App) {
	name := newApp().Name
	t.Run("docs name every flag", func(t *testing.T) {
		docs, err := Load(root, "docs/*.md")
		require.NoError(t, err)
		assert.Empty(t, Undocumented(newApp(), docs), "flags of %s no page of docs/ names as --flag", name)
	})
	t.Run("doc command lines use real flags", func(t *testing.T) {
		docs, err := Load(root, "*.md", "docs/*.md")
		require.NoError(t, err)
		assert.Empty(t, BadCommandLines(newApp(), docs), "command lines of %s in the docs", name)
	})
	t.Run("version", func(t *testing.T) {
		var out bytes.Buffer
		app := newApp()
		app.Writer = &out
		require.NoError(t, app.Run([]string{name, "--version"}))
		assert.Regexp(t, `^`+name+` version \S.*\n$`, out.String())
		assert.NotContains(t, out.String(), "devel", "a test binary has no VCS stamp: it names its build")
	})
}

// FlagNames lists flags as their names and aliases with their environment
// variables, one line a flag, sorted: two programs that take the same
// flags list the same lines.
func FlagNames(flags []cli.Flag) []string {
	var out []string
	for _, f := range flags {
		line := strings.Join(f.Names(), ",")
		if e, ok := f.(interface{ GetEnvVars() []string }); ok {
			line += " " + strings.Join(e.GetEnvVars(), ",")
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}
