package rubrics

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// specHelp lists the rubrics a spec may name.
const specHelp = "exact, numeric, numeric:TOLERANCE, contains, regex, regex:PATTERN, tests, command:PROGRAM, judge, judge:MODEL, " +
	"weighted sums of them (tests*0.8+judge*0.2), rank:SPEC"

// Compile builds a Program from its spec. A spec is one part, or parts
// joined by + with optional weights:
//
//	exact             normalized answer equals the task's answer
//	numeric[:TOL]     last number in the answer is within TOL of the task's (default 0)
//	contains          normalized answer contains the task's answer
//	regex[:PATTERN]   answer matches PATTERN, or the task's answer as a pattern
//	tests             the task's verifier: its reward, its metrics as tests.NAME
//	command:PROGRAM   a program prints the reward, or a JSON object of named
//	                  numbers (option timeout=DURATION, default 1m)
//	judge[:MODEL]     a model grades the answer from 0 to 10 (options
//	                  template=PATH, a text/template given JudgeData; scale=N)
//	rank:SPEC         SPEC per rollout; a group of rollouts is rewarded by rank
//
// Options follow the part's name: judge?template=grade.tmpl:gpt-4.1. A weight is a non-negative number
// before (0.5*exact) or after (exact*0.5) a part, 1 when omitted; the reward
// is the weighted mean of the parts' rewards (weights are normalized to sum
// to 1). A part may be labelled, style=judge:gpt-4.1, to name its
// metric; two parts may not share a name. The argument of regex runs to the
// end of the spec, + and * included, so such a part comes last, or is put in
// parentheses, which then hold it to its closing parenthesis:
// (regex:^a+$)*0.3 + tests*0.7. The program of command ends at a space, an
// operator or a parenthesis (command:./check.sh*0.5), unless the part is in
// parentheses, which hold a whole command line: (command:python3 grade.py --strict)*0.5.
//
// An error names the spec and what is wrong with it; a spec that compiles
// may still be unusable for a task or a worker (Program.Check).
func Compile(spec string) (*Program, error) {
	text := strings.TrimSpace(spec)
	prog := &Program{spec: text}
	body := text
	if rest, ok := strings.CutPrefix(text, "rank:"); ok {
		prog.rank, body = true, rest
	}
	p := &parser{spec: text, s: body}
	parts, err := p.sum()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(parts))
	for _, pt := range parts {
		if seen[pt.name] {
			return nil, p.errorf("two parts are named %q; label one, as in %s2=%s", pt.name, pt.name, pt.name)
		}
		seen[pt.name] = true
		prog.total += pt.weight
	}
	if prog.total <= 0 {
		return nil, p.errorf("the weights sum to 0")
	}
	prog.parts = parts
	return prog, nil
}

// kind is a kind of part: what it accepts and how it is built.
type kind struct {
	arg argUse
	raw bool // the argument runs to the end of the spec (or its parentheses)
	// rawInParens: in parentheses, the argument runs to the closing one;
	// elsewhere it ends at a space, an operator or a parenthesis.
	rawInParens bool
	options     []string
	build       func(a args) (scorer, error)
}

type argUse int

const (
	noArg argUse = iota
	optionalArg
	requiredArg
)

// args is a part as written: its argument and options.
type args struct {
	arg     string
	hasArg  bool
	options map[string]string
}

var kinds = map[string]kind{
	"exact":    {build: func(args) (scorer, error) { return text{Exact{}}, nil }},
	"contains": {build: func(args) (scorer, error) { return text{Contains{}}, nil }},
	"numeric":  {arg: optionalArg, build: buildNumeric},
	"regex":    {arg: optionalArg, raw: true, build: buildRegex},
	"tests":    {build: func(args) (scorer, error) { return tests{}, nil }},
	"judge":    {arg: optionalArg, options: []string{"template", "scale"}, build: buildJudge},
	"command":  {arg: requiredArg, rawInParens: true, options: []string{"timeout"}, build: buildCommand},
}

func buildNumeric(a args) (scorer, error) {
	if !a.hasArg {
		return text{Numeric{}}, nil
	}
	tol, err := strconv.ParseFloat(a.arg, 64)
	if err != nil || tol < 0 || math.IsNaN(tol) {
		return nil, fmt.Errorf("tolerance %q is not a non-negative number", a.arg)
	}
	return text{Numeric{Tolerance: tol}}, nil
}

func buildRegex(a args) (scorer, error) {
	if !a.hasArg {
		return text{Regex{}}, nil
	}
	re, err := regexp.Compile(a.arg)
	if err != nil {
		return nil, err
	}
	return text{Regex{Pattern: re}}, nil
}

// parser reads a spec's parts. Raw arguments run to the end of s, which is
// the whole spec or what a pair of parentheses holds.
type parser struct {
	spec  string // the whole spec, for errors
	s     string
	pos   int
	inner bool // s is what a pair of parentheses holds
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("rubric %q: %s", p.spec, fmt.Sprintf(format, args...))
}

// unknown is the error for a part that names no rubric.
func (p *parser) unknown(part string) error {
	if part == p.spec {
		return fmt.Errorf("unknown rubric %q (valid: %s)", part, specHelp)
	}
	return p.errorf("unknown rubric %q (valid: %s)", part, specHelp)
}

// sum reads term {"+" term} to the end of s.
func (p *parser) sum() ([]part, error) {
	var parts []part
	for {
		pt, err := p.term()
		if err != nil {
			return nil, err
		}
		parts = append(parts, pt)
		p.skipSpace()
		if p.done() {
			return parts, nil
		}
		if p.s[p.pos] != '+' {
			return nil, p.errorf("unexpected %q after %s: join parts with +", p.s[p.pos:], pt.name)
		}
		p.pos++
	}
}

// term reads [WEIGHT "*"] unit ["*" WEIGHT], where a unit is a part or a
// part in parentheses.
func (p *parser) term() (part, error) {
	p.skipSpace()
	weight, weighted := 1.0, false
	if c := p.peek(); isDigit(c) || c == '.' {
		w, err := p.weight()
		if err != nil {
			return part{}, err
		}
		p.skipSpace()
		if p.peek() != '*' {
			return part{}, p.errorf("weight %s must be followed by * and a rubric", fmtNum(w))
		}
		p.pos++
		p.skipSpace()
		weight, weighted = w, true
	}
	var pt part
	if p.peek() == '(' {
		end := p.closing()
		if end < 0 {
			return part{}, p.errorf("a parenthesis is not closed")
		}
		inner := &parser{spec: p.spec, s: p.s[p.pos+1 : end], inner: true}
		inner.skipSpace()
		var err error
		if pt, err = inner.part(); err != nil {
			return part{}, err
		}
		inner.skipSpace()
		if !inner.done() {
			return part{}, p.errorf("parentheses hold one rubric, not %q after %s", inner.s[inner.pos:], pt.name)
		}
		p.pos = end + 1
	} else {
		var err error
		if pt, err = p.part(); err != nil {
			return part{}, err
		}
	}
	p.skipSpace()
	if p.peek() == '*' {
		if weighted {
			return part{}, p.errorf("%s has two weights", pt.name)
		}
		p.pos++
		p.skipSpace()
		w, err := p.weight()
		if err != nil {
			return part{}, err
		}
		weight = w
	}
	pt.weight = weight
	return pt, nil
}

// weight reads a non-negative decimal number.
func (p *parser) weight() (float64, error) {
	start := p.pos
	for !p.done() && (isDigit(p.s[p.pos]) || p.s[p.pos] == '.') {
		p.pos++
	}
	tok := p.s[start:p.pos]
	if tok == "" {
		return 0, p.errorf("expected a weight (a non-negative number) at %q", p.s[start:])
	}
	w, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return 0, p.errorf("weight %q is not a number", tok)
	}
	return w, nil
}

// part reads [LABEL "="] KIND ["?" OPTIONS] [":" ARG].
func (p *parser) part() (part, error) {
	name := p.ident()
	label := ""
	if name != "" && p.peek() == '=' {
		p.pos++
		label, name = name, p.ident()
	}
	kindStart := p.pos - len(name)
	if name == "rank" {
		return part{}, p.errorf("rank: applies to the whole spec: rank:SPEC")
	}
	k, ok := kinds[name]
	if !ok {
		return part{}, p.unknown(p.s[kindStart:p.stop()])
	}
	a := args{options: map[string]string{}}
	if p.peek() == '?' {
		p.pos++
		opts := p.s[p.pos:p.stop()]
		if i := strings.IndexByte(opts, ':'); i >= 0 {
			opts = opts[:i]
		}
		p.pos += len(opts)
		if err := p.options(name, k, opts, a.options); err != nil {
			return part{}, err
		}
	}
	if p.peek() == ':' {
		p.pos++
		a.hasArg = true
		if k.raw || k.rawInParens && p.inner {
			a.arg = strings.TrimRightFunc(p.s[p.pos:], unicode.IsSpace)
			p.pos = len(p.s)
		} else {
			end := p.stop()
			a.arg, p.pos = p.s[p.pos:end], end
		}
	}
	written := p.s[kindStart:p.pos]
	switch {
	case a.hasArg && k.arg == noArg:
		return part{}, p.unknown(written)
	case !a.hasArg && k.arg == requiredArg:
		return part{}, p.errorf("%s needs an argument: %s:…", name, name)
	}
	sc, err := k.build(a)
	if err != nil {
		return part{}, p.errorf("%v", err)
	}
	if label == "" {
		label = name
	}
	return part{name: label, scorer: sc}, nil
}

// options reads KEY=VALUE{&KEY=VALUE} into into.
func (p *parser) options(name string, k kind, opts string, into map[string]string) error {
	for _, kv := range strings.Split(opts, "&") {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || value == "" {
			return p.errorf("option %q of %s is not KEY=VALUE", kv, name)
		}
		known := false
		for _, o := range k.options {
			known = known || o == key
		}
		if !known {
			if len(k.options) == 0 {
				return p.errorf("%s takes no options", name)
			}
			return p.errorf("%s has no option %q (options: %s)", name, key, strings.Join(k.options, ", "))
		}
		into[key] = value
	}
	return nil
}

// ident reads a name: a letter, then letters, digits, _ and -.
func (p *parser) ident() string {
	start := p.pos
	for !p.done() {
		c := p.s[p.pos]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (p.pos == start || !isDigit(c) && c != '_' && c != '-') {
			break
		}
		p.pos++
	}
	return p.s[start:p.pos]
}

// stop is where the token at pos ends: at a space, an operator or a
// parenthesis.
func (p *parser) stop() int {
	i := p.pos
	for i < len(p.s) && !strings.ContainsRune(" \t\n\r+*()", rune(p.s[i])) {
		i++
	}
	return i
}

// closing returns the index of the parenthesis that closes the one at pos,
// or -1.
func (p *parser) closing() int {
	depth := 0
	for i := p.pos; i < len(p.s); i++ {
		switch p.s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func (p *parser) skipSpace() {
	for !p.done() && unicode.IsSpace(rune(p.s[p.pos])) {
		p.pos++
	}
}

func (p *parser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.pos]
}

func (p *parser) done() bool { return p.pos >= len(p.s) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
