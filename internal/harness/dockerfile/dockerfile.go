// Package dockerfile is the subset of a Dockerfile that makes sense
// without a container engine: a task's workspace on this host's files is
// prepared from it (WORKDIR, COPY and ADD of the build context, ENV, ARG),
// and what only an engine can carry out (RUN, earlier build stages, COPY
// --from, ADD of a URL) is named.
package dockerfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Cmd  string // upper case: RUN, COPY, …
	Args string
	Line int // 1-based, of its first line
}

// String is the instruction as written (joined), cut to a short line, for notes.
func (in Instruction) String() string {
	return shorten(in.Cmd+" "+in.Args, 100)
}

// Parse splits a Dockerfile into instructions: comments and blank
// lines dropped, continuation lines joined (the escape character is \ or
// the one a "# escape=" directive names), heredoc bodies (RUN <<EOF …)
// consumed.
func Parse(data []byte) ([]Instruction, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	escape := byte('\\')
	// Parser directives come first, as comments.
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "#") {
			break
		}
		k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(l, "#")), "=")
		if !ok {
			break
		}
		if strings.EqualFold(strings.TrimSpace(k), "escape") && strings.TrimSpace(v) == "`" {
			escape = '`'
		}
	}
	var out []Instruction
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		start := i + 1
		var b strings.Builder
		for {
			cont := strings.HasSuffix(l, string(escape))
			if cont {
				l = strings.TrimSuffix(l, string(escape))
			}
			b.WriteString(l)
			if !cont {
				break
			}
			b.WriteByte(' ')
			// Comment lines inside a continuation are dropped.
			for i++; i < len(lines); i++ {
				l = strings.TrimSpace(lines[i])
				if !strings.HasPrefix(l, "#") {
					break
				}
			}
			if i >= len(lines) {
				break
			}
		}
		cmd, args, _ := strings.Cut(b.String(), " ")
		in := Instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start}
		for _, word := range heredocWords(in.Args) {
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != word; i++ {
			}
		}
		out = append(out, in)
	}
	if len(out) == 0 {
		return nil, errors.New("Dockerfile has no instructions")
	}
	return out, nil
}

// heredocWords are the delimiters of the heredocs args opens (<<EOF, <<-"EOF").
func heredocWords(args string) []string {
	var words []string
	for rest := args; ; {
		i := strings.Index(rest, "<<")
		if i < 0 {
			return words
		}
		rest = strings.TrimPrefix(rest[i+2:], "-")
		w := strings.FieldsFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == ';' || r == '>' || r == '|' || r == '&' })
		if len(w) == 0 {
			return words
		}
		word := strings.Trim(w[0], `"'`)
		if word != "" && word[0] != '<' {
			words = append(words, word)
		}
	}
}

// copyOp is one source of a COPY or ADD, resolved against the workdir.
type copyOp struct {
	in      Instruction
	src     string // relative to the build context, slash-separated
	dst     string // absolute in the image
	intoDir bool   // dst is a directory: ends in /, or the instruction has several sources
}

// Plan is what the interpretable subset of a Dockerfile asks for.
type Plan struct {
	// Workdir is the final WORKDIR, absolute; DefaultWorkdir when none
	// is given.
	Workdir string
	// Env is its ENV, KEY=VALUE.
	Env []string
	// Notes say what was skipped, or done otherwise than an engine would.
	Notes []string
	// Unsupported are the lines that cannot be carried out outside a
	// container engine, in the Dockerfile's order, each noted too.
	Unsupported []Unsupported

	copies []copyOp
}

// Unsupported is a Dockerfile line only a container engine can carry out.
type Unsupported struct {
	Line int
	// Instruction is the instruction as written, shortened.
	Instruction string
	Reason      string // e.g. "RUN is not run outside a container engine"
}

// skip notes a line that cannot be carried out outside a container engine
// and keeps it among the unsupported ones.
func (p *Plan) skip(in Instruction, note, reason string) {
	p.Notes = append(p.Notes, note)
	p.Unsupported = append(p.Unsupported, Unsupported{Line: in.Line, Instruction: in.String(), Reason: reason})
}

// DefaultWorkdir is the WORKDIR of a Dockerfile that sets none, as
// Harbor's tasks have it.
const DefaultWorkdir = "/app"

// Interpret interprets the subset of a Dockerfile that makes sense
// without Docker: WORKDIR, COPY and ADD of build-context paths, ENV and ARG
// (for ${VAR} substitution). Everything else is noted; what changes the
// image (RUN, earlier build stages, COPY --from, ADD of a URL) is listed in
// the plan's unsupported lines as well. Only the last build stage counts,
// as in an image. lookup gives the values of variables the Dockerfile does
// not set itself.
func Interpret(ins []Instruction, lookup func(string) string) (Plan, error) {
	p := Plan{Workdir: DefaultWorkdir}
	last := -1
	for i, in := range ins {
		if in.Cmd == "FROM" {
			last = i
		}
	}
	vars := map[string]string{}
	get := func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return lookup(name)
	}
	stages := 0
	var firstFrom Instruction
	for i, in := range ins {
		if i < last {
			if in.Cmd == "FROM" {
				if stages == 0 {
					firstFrom = in
				}
				stages++
			}
			// ARGs before the first FROM are global.
			if stages == 0 && in.Cmd == "ARG" {
				setArg(vars, in.Args, get)
			}
			continue
		}
		switch in.Cmd {
		case "FROM":
			if stages > 0 {
				p.skip(firstFrom, fmt.Sprintf("%d earlier build stage(s): skipped outside docker", stages),
					"build stages before the last are not built outside a container engine")
			}
			from := Instruction{Cmd: in.Cmd, Args: expand(in.Args, get, false)}
			p.Notes = append(p.Notes, from.String()+": the host's system stands in for the image")
		case "ARG":
			setArg(vars, in.Args, get)
		case "ENV":
			kvs, err := parseEnv(expand(in.Args, get, true))
			if err != nil {
				return p, fmt.Errorf("Dockerfile line %d: ENV: %w", in.Line, err)
			}
			for _, kv := range kvs {
				name, value, _ := strings.Cut(kv, "=")
				vars[name] = value
				p.Env = append(p.Env, kv)
			}
		case "WORKDIR":
			dir := strings.TrimSpace(expand(in.Args, get, false))
			if dir == "" {
				return p, fmt.Errorf("Dockerfile line %d: WORKDIR without a directory", in.Line)
			}
			if !path.IsAbs(dir) {
				dir = path.Join(p.Workdir, dir)
			}
			p.Workdir = path.Clean(dir)
		case "COPY", "ADD":
			if err := p.planCopy(in, get); err != nil {
				return p, fmt.Errorf("Dockerfile line %d: %w", in.Line, err)
			}
		case "RUN":
			p.skip(in, in.String()+": not run outside docker", "RUN is not run outside a container engine")
		default:
			p.Notes = append(p.Notes, in.String()+": skipped outside docker")
		}
	}
	return p, nil
}

// setArg records ARG NAME[=default] unless NAME already has a value.
func setArg(vars map[string]string, args string, get func(string) string) {
	for _, f := range strings.Fields(args) {
		name, def, hasDef := strings.Cut(f, "=")
		if _, ok := vars[name]; ok {
			continue
		}
		if hasDef {
			vars[name] = unquote(expand(def, get, false))
		}
	}
}

// planCopy reads COPY/ADD [--flags] src... dest (or the JSON array form)
// into the plan's copies, relative to its workdir. A copy from another
// image or stage, or an ADD of a URL, cannot be carried out here.
func (p *Plan) planCopy(in Instruction, get func(string) string) error {
	args := strings.TrimSpace(in.Args)
	var flags []string
	for strings.HasPrefix(args, "--") {
		f, rest, _ := strings.Cut(args, " ")
		flags = append(flags, f)
		args = strings.TrimSpace(rest)
	}
	for _, f := range flags {
		if strings.HasPrefix(f, "--from") {
			p.skip(in, in.String()+": copies from another image or stage, skipped outside docker",
				in.Cmd+" --from copies from another image or stage, which is not built outside a container engine")
			return nil
		}
		// --chown, --chmod, --link, … change nothing a workspace keeps.
	}
	var words []string
	if strings.HasPrefix(args, "[") {
		if err := json.Unmarshal([]byte(args), &words); err != nil {
			return fmt.Errorf("%s: the JSON form is not an array of strings", in.Cmd)
		}
		for i := range words {
			words[i] = expand(words[i], get, false)
		}
	} else {
		words = strings.Fields(expand(args, get, false))
	}
	if len(words) < 2 {
		return fmt.Errorf("%s needs a source and a destination", in.Cmd)
	}
	srcs, dst := words[:len(words)-1], words[len(words)-1]
	intoDir := strings.HasSuffix(dst, "/") || len(srcs) > 1
	if !path.IsAbs(dst) {
		dst = path.Join(p.Workdir, dst)
	}
	dst = path.Clean(dst)
	var notes []string
	fetched := false
	for _, src := range srcs {
		if in.Cmd == "ADD" && isRemote(src) {
			notes = append(notes, fmt.Sprintf("ADD %s: not fetched outside docker", shorten(src, 80)))
			fetched = true
			continue
		}
		if in.Cmd == "ADD" && isArchive(src) {
			notes = append(notes, fmt.Sprintf("ADD %s: copied without extracting it outside docker", shorten(src, 80)))
		}
		p.copies = append(p.copies, copyOp{in: in, src: src, dst: dst, intoDir: intoDir})
	}
	switch note := strings.Join(notes, "; "); {
	case fetched:
		p.skip(in, note, "ADD of a URL or a git repository is not fetched outside a container engine")
	case note != "":
		p.Notes = append(p.Notes, note)
	}
	return nil
}

// isRemote reports whether an ADD source is fetched rather than copied
// from the build context: a URL or a git repository.
func isRemote(src string) bool {
	return strings.Contains(src, "://") || strings.HasPrefix(src, "git@")
}

func isArchive(name string) bool {
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"} {
		if strings.HasSuffix(strings.ToLower(name), ext) {
			return true
		}
	}
	return false
}

// parseEnv reads ENV's arguments: KEY=VALUE pairs (values may be quoted), or
// the legacy form KEY VALUE.
func parseEnv(args string) ([]string, error) {
	args = strings.TrimSpace(args)
	name, rest, _ := strings.Cut(args, " ")
	if !strings.Contains(name, "=") {
		if name == "" {
			return nil, errors.New("no variable")
		}
		return []string{name + "=" + strings.TrimSpace(rest)}, nil
	}
	words, err := splitWords(args)
	if err != nil {
		return nil, err
	}
	var kvs []string
	for _, w := range words {
		name, value, ok := strings.Cut(w, "=")
		if !ok || name == "" {
			return nil, errors.New("want KEY=VALUE pairs")
		}
		kvs = append(kvs, name+"="+value)
	}
	return kvs, nil
}

// splitWords splits s at unquoted spaces, removing quotes and backslash
// escapes as a shell would.
func splitWords(s string) ([]string, error) {
	var words []string
	var b strings.Builder
	in := false
	var quote rune
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != '\'' && c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			in = true
		case quote != 0:
			b.WriteByte(s[i])
		case c == '"' || c == '\'':
			quote, in = c, true
		case unicode.IsSpace(c):
			if in {
				words = append(words, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(s[i])
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if in {
		words = append(words, b.String())
	}
	return words, nil
}

func unquote(s string) string {
	if w, err := splitWords(s); err == nil && len(w) == 1 {
		return w[0]
	}
	return s
}

// expand substitutes $VAR, ${VAR}, ${VAR:-default} and ${VAR:+alt} as a
// Dockerfile does. In quoted mode, text in single quotes is left alone.
func expand(s string, get func(string) string, quoted bool) string {
	var b strings.Builder
	inSingle := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\'':
			inSingle = !inSingle
			b.WriteByte(c)
		case c == '\\' && i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case c != '$' || inSingle || i+1 == len(s):
			b.WriteByte(c)
		case s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			expr := s[i+2 : i+end]
			i += end
			name, word := expr, ""
			op := ""
			if j := strings.Index(expr, ":"); j >= 0 && j+1 < len(expr) {
				name, op, word = expr[:j], expr[j:j+2], expr[j+2:]
			}
			v := get(name)
			switch op {
			case ":-":
				if v == "" {
					v = word
				}
			case ":+":
				if v != "" {
					v = word
				}
			}
			b.WriteString(v)
		default:
			j := i + 1
			for j < len(s) && (s[j] == '_' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			if j == i+1 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(get(s[i+1 : j]))
			i = j - 1
		}
	}
	return b.String()
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
