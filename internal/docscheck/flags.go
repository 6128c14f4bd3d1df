package docscheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Undocumented returns the flags of app and of all its commands that no doc
// names as --name, each as "--name (starter eval, starter train)". A flag
// is documented by its first name; its aliases and hidden flags (former
// names kept for old scripts) need not be.
func Undocumented(app *cli.App, docs []Doc) []string {
	var all strings.Builder
	for _, d := range docs {
		all.WriteString(d.Text + "\n")
	}
	text := all.String()
	missing := map[string][]string{}
	var names []string
	walk(app, func(path string, flags []cli.Flag) {
		for _, f := range flags {
			if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
				continue
			}
			name := f.Names()[0]
			if mentioned(text, name) {
				continue
			}
			if _, seen := missing[name]; !seen {
				names = append(names, name)
			}
			missing[name] = append(missing[name], path)
		}
	})
	var out []string
	for _, name := range names {
		out = append(out, fmt.Sprintf("%s (%s)", dashed(name), strings.Join(missing[name], ", ")))
	}
	return out
}

// mentioned reports whether text names the flag as --name (or -n), not as
// the beginning of a longer flag's name.
func mentioned(text, name string) bool {
	re := regexp.MustCompile(regexp.QuoteMeta(dashed(name)) + `($|[^A-Za-z0-9_.-]|\.[^A-Za-z0-9])`)
	return re.MatchString(text)
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// walk calls fn with the flags of the app and of each command, and the
// command's path ("starter eval").
func walk(app *cli.App, fn func(path string, flags []cli.Flag)) {
	fn(app.Name, app.Flags)
	var visit func(prefix string, cmds []*cli.Command)
	visit = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			path := prefix + " " + c.Name
			fn(path, c.Flags)
			visit(path, c.Subcommands)
		}
	}
	visit(app.Name, app.Commands)
}

// builtin are the flags urfave/cli adds to every app (version) and command
// (help) as it runs.
var builtin = []string{"help", "h", "version", "v"}

// BadCommandLines returns, as "README.md:12: starter eval --nope: eval has
// no flag --nope", every command line of the docs that runs app (`starter
// eval …`, `go run ./starter …`, `bin/starter …`, in code blocks and in
// inline code) and names a command or a flag app does not have.
func BadCommandLines(app *cli.App, docs []Doc) []string {
	var out []string
	for _, d := range docs {
		for _, l := range codeSpans(d.Text) {
			for _, args := range commandLines(l.text, app.Name) {
				if err := checkArgs(app, args); err != nil {
					out = append(out, fmt.Sprintf("%s:%d: %s: %v", d.Path, l.n, strings.Join(args, " "), err))
				}
			}
		}
	}
	return out
}

// commandLines returns the invocations of program in one line of shell:
// the program's name and the arguments that follow it, up to the end of
// the command (a pipe, a redirection, a comment, a separator).
func commandLines(text, program string) [][]string {
	var out [][]string
	words := shellWords(text)
	for i := 0; i < len(words); i++ {
		w := strings.TrimPrefix(strings.TrimPrefix(words[i], "./"), "bin/")
		if w != program {
			continue
		}
		args := []string{program}
		for i++; i < len(words) && !ends(words[i]); i++ {
			args = append(args, words[i])
		}
		out = append(out, args)
	}
	return out
}

func ends(w string) bool {
	return slices.Contains([]string{"|", "||", "&&", ";", "&", ">", ">>", "2>", "<"}, w) || strings.HasPrefix(w, "#")
}

// shellWords splits a line into words the way a shell would, quotes
// removed, roughly: enough for the command lines of docs.
func shellWords(text string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range text {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// checkArgs checks a command line's commands and flags against app. Flags
// are looked up where urfave/cli looks them up: before a command's name,
// on the app; after it, on that command.
func checkArgs(app *cli.App, args []string) error {
	where, flags, cmds := app.Name, app.Flags, app.Commands
	positional := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if positional {
				continue
			}
			if len(cmds) == 0 {
				positional = true
				continue
			}
			c := findCommand(cmds, a)
			if c == nil {
				return fmt.Errorf("%s has no command %q", where, a)
			}
			where, flags, cmds = c.Name, c.Flags, c.Subcommands
			continue
		}
		if positional {
			return fmt.Errorf("%s after an argument is not read: flags go first", a)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := findFlag(flags, name)
		if f == nil {
			if slices.Contains(builtin, name) {
				continue
			}
			return fmt.Errorf("%s has no flag %s", where, dashed(name))
		}
		if v, ok := f.(cli.DocGenerationFlag); ok && v.TakesValue() && !hasValue {
			i++ // the flag's value, which may start with a dash (-1)
		}
	}
	return nil
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}
