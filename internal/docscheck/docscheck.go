// Package docscheck holds the project's Markdown docs to its code: every
// flag of a binary is documented, the command lines the docs show name only
// flags their command has, relative links lead to files and headings that
// exist, and the tests a doc names are tests of the repository.
//
// The binaries' tests (starter, worker) check their own cli.App with it; the
// root package's tests check the links and test names.
package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Doc is a Markdown file of the repository.
type Doc struct {
	// Path is the file's path relative to the repository root, with slashes.
	Path string
	Text string
}

// Load reads the Markdown files matching patterns (globs relative to root),
// in the order given; a pattern that matches nothing is an error.
func Load(root string, patterns ...string) ([]Doc, error) {
	var docs []Doc
	for _, pattern := range patterns {
		paths, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, fmt.Errorf("glob %s: %w", pattern, err)
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("no file matches %s under %s", pattern, root)
		}
		slices.Sort(paths)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return nil, err
			}
			docs = append(docs, Doc{Path: filepath.ToSlash(rel), Text: string(b)})
		}
	}
	return docs, nil
}

// fence opens or closes a fenced code block.
var fence = regexp.MustCompile("^\\s*(```|~~~)")

// shell are the info strings of fenced blocks holding shell commands.
var shell = []string{"sh", "bash", "shell", "console", "zsh"}

// split returns the lines of a document's shell code blocks (continuation
// lines joined), each with the line number it starts on, and the document's
// text outside its code blocks, blank lines in their place.
func split(text string) (code []line, prose string) {
	var b strings.Builder
	in, isShell := false, false
	var pending *line
	for i, l := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatchIndex(l); m != nil {
			in = !in
			isShell = in && slices.Contains(shell, strings.TrimSpace(l[m[1]:]))
			b.WriteString("\n")
			continue
		}
		if !in {
			b.WriteString(l + "\n")
			continue
		}
		b.WriteString("\n")
		if !isShell {
			continue
		}
		if pending != nil {
			pending.text += " " + l
		} else {
			pending = &line{n: i + 1, text: l}
		}
		if strings.HasSuffix(strings.TrimRight(pending.text, " "), "\\") {
			pending.text = strings.TrimSuffix(strings.TrimRight(pending.text, " "), "\\")
			continue
		}
		code = append(code, *pending)
		pending = nil
	}
	return code, b.String()
}

type line struct {
	n    int
	text string
}

// inlineCode is a code span of one backtick.
var inlineCode = regexp.MustCompile("`([^`]+)`")

// codeSpans returns a document's code: the lines of its shell blocks and its
// inline code spans, each with its line number.
func codeSpans(text string) []line {
	code, prose := split(text)
	for _, m := range inlineCode.FindAllStringSubmatchIndex(prose, -1) {
		n := strings.Count(prose[:m[0]], "\n") + 1
		code = append(code, line{n: n, text: strings.ReplaceAll(prose[m[2]:m[3]], "\n", " ")})
	}
	return code
}
