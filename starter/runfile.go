package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// Flags of the run commands that read a run configuration file and print
// the resolved run instead of starting it.
var (
	configFlag = &cli.StringFlag{Name: "config",
		Usage: "run configuration file (YAML, or TOML when named *.toml): keys are flag names without dashes; flags given on the command line or in the environment override it"}
	dryRunFlag = &cli.BoolFlag{Name: "dry-run",
		Usage: "print the resolved run configuration (in the --config format, YAML by default; secrets blanked) and exit without starting anything"}
)

// prepareRun is the Before of the run commands: it checks the positional
// arguments, fills the flags not given from --config, and with --dry-run
// prints the resolved configuration and ends the command.
func prepareRun(args int) cli.BeforeFunc {
	return func(cctx *cli.Context) error {
		if err := takesArgs(args)(cctx); err != nil {
			return err
		}
		if err := applyRunFile(cctx, cctx.String(configFlag.Name)); err != nil {
			return err
		}
		if !cctx.Bool(dryRunFlag.Name) {
			return nil
		}
		if _, err := runConfig(cctx); err != nil {
			return err
		}
		out, err := resolvedRun(cctx, isTOML(cctx.String(configFlag.Name)))
		if err != nil {
			return err
		}
		fmt.Fprint(cctx.App.Writer, string(out))
		return exitCode(0)
	}
}

// listKeys are the repeatable flags a run file may give a list of values.
var listKeys = []string{"harness-env", "role", "provider"}

// sweepKeys are the flags a run file may give a list of, as a sweep's
// matrix: the list is the flag's comma-separated value.
var sweepKeys = []string{"harness", "model"}

// notFromFile are the flags a run file cannot set.
var notFromFile = []string{configFlag.Name, dryRunFlag.Name, "help"}

// applyRunFile sets each flag the file at path names and that was not given
// on the command line or in the environment. An empty path reads nothing.
func applyRunFile(cctx *cli.Context, path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", configFlag.Name, err)
	}
	values := map[string]any{}
	if isTOML(path) {
		err = toml.Unmarshal(b, &values)
	} else {
		err = yaml.Unmarshal(b, &values)
	}
	if err != nil {
		return fmt.Errorf("run file %s: %w", path, err)
	}
	known := map[string]bool{}
	for _, f := range cctx.Command.Flags {
		for _, n := range f.Names() {
			known[n] = !slices.Contains(notFromFile, n)
		}
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !known[name] {
			return fmt.Errorf("run file %s: unknown key %q (keys are the flags of starter %s, without dashes)", path, name, cctx.Command.Name)
		}
		if cctx.IsSet(name) {
			continue // the command line and the environment win
		}
		v := values[name]
		if list, ok := v.([]any); ok && slices.Contains(listKeys, name) {
			for _, item := range list {
				if err := cctx.Set(name, fmt.Sprint(item)); err != nil {
					return fmt.Errorf("run file %s: key %q: %w", path, name, err)
				}
			}
			continue
		}
		if list, ok := v.([]any); ok && slices.Contains(sweepKeys, name) {
			items := make([]string, len(list))
			for i, item := range list {
				if items[i] = fmt.Sprint(item); strings.Contains(items[i], ",") {
					return fmt.Errorf("run file %s: key %q: item %q holds a comma; quote it inside a single string instead, e.g. %s: \"a,'%s'\"", path, name, items[i], name, items[i])
				}
			}
			v = strings.Join(items, ",")
		}
		switch v.(type) {
		case map[string]any, []any, nil:
			return fmt.Errorf("run file %s: key %q: want a single value", path, name)
		}
		if err := cctx.Set(name, fmt.Sprint(v)); err != nil {
			return fmt.Errorf("run file %s: key %q: %w", path, name, err)
		}
	}
	return nil
}

func isTOML(path string) bool { return strings.EqualFold(filepath.Ext(path), ".toml") }

// resolvedRun is the value of every visible flag of the command that is
// given or has a default, the configuration the run would start with, in
// YAML or TOML: a file --config reads back. Secrets are blanked.
func resolvedRun(cctx *cli.Context, asTOML bool) ([]byte, error) {
	values := map[string]any{}
	for _, f := range cctx.Command.Flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		name := f.Names()[0]
		if slices.Contains(notFromFile, name) {
			continue
		}
		v := cctx.Value(name)
		if !cctx.IsSet(name) && (v == nil || reflect.ValueOf(v).IsZero()) {
			continue // not part of the run: no value, and none given
		}
		switch x := v.(type) {
		case time.Duration:
			v = x.String()
		case cli.Generic: // not used by the run commands; printed as text
			v = x.String()
		}
		if isSecret(name) && cctx.String(name) != "" {
			v = ""
		}
		values[name] = v
	}
	if asTOML {
		return toml.Marshal(values)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(values); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// isSecret tells the flags that hold a credential (a token, a password),
// not the name of a file or variable holding one.
func isSecret(name string) bool {
	if strings.HasSuffix(name, "-file") || strings.HasSuffix(name, "-env") {
		return false
	}
	for _, word := range []string{"token", "password", "secret", "api-key"} {
		if strings.Contains(name, word) {
			return true
		}
	}
	return false
}
