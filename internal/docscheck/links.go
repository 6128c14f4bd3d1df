package docscheck

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// link is a Markdown inline link or image: [text](target "title").
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// BrokenLinks returns every relative link of the docs that leads nowhere, as
// "README.md:3: docs/nope.md: no such file": its file must exist under root,
// and an anchor into a Markdown file must be one of its headings' anchors.
// Links with a scheme (https:, mailto:) are not followed.
func BrokenLinks(root string, docs []Doc) []string {
	var out []string
	for _, d := range docs {
		_, prose := split(d.Text)
		prose = inlineCode.ReplaceAllStringFunc(prose, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, m := range link.FindAllStringSubmatchIndex(prose, -1) {
			target := prose[m[2]:m[3]]
			n := strings.Count(prose[:m[0]], "\n") + 1
			if err := checkLink(root, d, target); err != nil {
				out = append(out, fmt.Sprintf("%s:%d: %s: %v", d.Path, n, target, err))
			}
		}
	}
	return out
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func checkLink(root string, from Doc, target string) error {
	if scheme.MatchString(target) {
		return nil
	}
	file, anchor, _ := strings.Cut(target, "#")
	rel, text := from.Path, from.Text
	if file != "" {
		rel = path.Join(path.Dir(from.Path), file)
		if strings.HasPrefix(rel, "../") {
			return fmt.Errorf("leads out of the repository")
		}
		full := filepath.Join(root, filepath.FromSlash(rel))
		if isDir(full) {
			return nil
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return fmt.Errorf("no such file %s", rel)
		}
		text = string(b)
	}
	if anchor == "" || !strings.HasSuffix(rel, ".md") {
		return nil
	}
	for _, a := range Anchors(text) {
		if a == anchor {
			return nil
		}
	}
	return fmt.Errorf("%s has no heading with anchor #%s", rel, anchor)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

var heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// Anchors returns the anchors GitHub gives a Markdown document's headings:
// lower case, punctuation dropped, spaces made dashes, and -1, -2, … after
// a repeated one.
func Anchors(text string) []string {
	_, prose := split(text)
	seen := map[string]int{}
	var out []string
	for _, m := range heading.FindAllStringSubmatch(prose, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}
