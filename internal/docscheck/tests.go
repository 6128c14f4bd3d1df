package docscheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	namedTest = regexp.MustCompile(`\bTest[A-Z0-9_]\w*`)
	testFunc  = regexp.MustCompile(`(?m)^func (Test\w*)\(`)
)

// UnknownTests returns the test names (TestXxx) a doc mentions that are not
// a test function of any _test.go file under root.
func UnknownTests(root string, doc Doc) ([]string, error) {
	have := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			have[m[1]] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, name := range namedTest.FindAllString(doc.Text, -1) {
		if !have[name] && !seen[name] {
			out = append(out, name)
		}
		seen[name] = true
	}
	return out, nil
}
