package docscheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	return &cli.App{
		Name: "starter",
		Commands: []*cli.Command{
			{Name: "eval", Flags: []cli.Flag{
				&cli.IntFlag{Name: "tasks"},
				&cli.StringFlag{Name: "viewer-addr"},
				&cli.BoolFlag{Name: "shuffle"},
				&cli.IntFlag{Name: "worker-rollouts", Hidden: true},
				&cli.StringFlag{Name: "interception.frp.server"},
			}},
			{Name: "status", Flags: []cli.Flag{&cli.StringFlag{Name: "address"}}},
		},
	}
}

func TestUndocumented(t *testing.T) {
	tests := []struct {
		doc  string
		want []string
	}{
		{"`--tasks`, `--viewer-addr`, --shuffle, --interception.frp.server and --address.", nil},
		{"--tasks --viewer-addr --shuffle --interception.frp.server", []string{"--address (starter status)"}},
		// A longer flag's name does not document a shorter one.
		{"--tasks-file --viewer-addr --shuffle --interception.frp.server.x --address",
			[]string{"--tasks (starter eval)", "--interception.frp.server (starter eval)"}},
	}
	for _, tt := range tests {
		got := Undocumented(testApp(), []Doc{{Path: "docs/a.md", Text: tt.doc}})
		assert.Equal(t, tt.want, got, "Undocumented(%q)", tt.doc)
	}
}

func TestBadCommandLines(t *testing.T) {
	tests := []struct {
		doc  string
		want []string
	}{
		{"```sh\ngo run ./starter eval --tasks 128 --shuffle --viewer-addr -1 # --nope\n```\n", nil},
		{"Run `starter status --address host:7233 <run-id>` or `bin/starter eval --tasks=3 | tee x --nope`.", nil},
		{"```sh\nX=1 go run ./starter eval --tasks 1 \\\n  --worker-rollouts 2 --help\n```\n", nil},
		// Output and diagrams are not command lines.
		{"```\nstarter SIGKILL --at 104\n```\n", nil},
		{"```sh\ngo run ./starter eval \\\n  --made-up 1\n```\n",
			[]string{"d.md:2: starter eval --made-up 1: eval has no flag --made-up"}},
		{"Then\n`starter status --tasks 3`.", []string{"d.md:2: starter status --tasks 3: status has no flag --tasks"}},
		{"`starter evals`", []string{`d.md:1: starter evals: starter has no command "evals"`}},
		{"`starter status <run-id> --address x`", []string{"d.md:1: starter status <run-id> --address x: --address after an argument is not read: flags go first"}},
	}
	for _, tt := range tests {
		got := BadCommandLines(testApp(), []Doc{{Path: "d.md", Text: tt.doc}})
		assert.Equal(t, tt.want, got, "BadCommandLines(%q)", tt.doc)
	}
}

func TestAnchors(t *testing.T) {
	got := Anchors("# evalflow\n\n## Token data for trainers (`--trace-tokens`)\n\n```sh\n# not a heading\n```\n\n## Two commands\n## Two commands\n")
	assert.Equal(t, []string{"evalflow", "token-data-for-trainers---trace-tokens", "two-commands", "two-commands-1"}, got)
}

func TestBrokenLinks(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("# A page\n## Its part\n"), 0o644))
	doc := Doc{Path: "README.md", Text: "# Top\n[a](docs/a.md) [b](docs/a.md#its-part) [c](#top) [d](https://x.example/y) [e](docs/)\n" +
		"[f](docs/b.md)\n[g](docs/a.md#nope) [h](#nope) `[i](no.md)`\n"}
	got := BrokenLinks(root, []Doc{doc})
	assert.Equal(t, []string{
		"README.md:3: docs/b.md: no such file docs/b.md",
		"README.md:4: docs/a.md#nope: docs/a.md has no heading with anchor #nope",
		"README.md:4: #nope: README.md has no heading with anchor #nope",
	}, got)
}

func TestUnknownTests(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "a_test.go"), []byte("package a\n\nfunc TestReal(t *testing.T) {}\n"), 0o644))
	got, err := UnknownTests(root, Doc{Text: "held by `TestReal` and `pkg.TestMadeUp`, TestReal/sub"})
	require.NoError(t, err)
	assert.Equal(t, []string{"TestMadeUp"}, got)
}

// A program whose docs name its flags and whose version names its build
// passes every check of Binary.
func TestBinary(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "usage.md"), []byte(
		"Run `starter eval --tasks 3 --shuffle`, with --viewer-addr, --interception.frp.server or `starter status --address x`.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("```sh\nstarter eval --tasks 1\n```\n"), 0o644))
	Binary(t, root, func() *cli.App {
		app := testApp()
		app.Version = "v1.2.3"
		return app
	})
}

func TestFlagNames(t *testing.T) {
	got := FlagNames([]cli.Flag{
		&cli.StringFlag{Name: "runs-dir", Aliases: []string{"r"}, EnvVars: []string{"EVALFLOW_RUNS_DIR"}},
		&cli.BoolFlag{Name: "debug"},
	})
	assert.Equal(t, []string{"debug ", "runs-dir,r EVALFLOW_RUNS_DIR"}, got)
}
