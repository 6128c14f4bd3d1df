package rubrics

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		spec  string
		rank  bool
		parts []part
	}{
		{"exact", false, []part{{"exact", 1, text{Exact{}}}}},
		{" exact ", false, []part{{"exact", 1, text{Exact{}}}}},
		{"contains", false, []part{{"contains", 1, text{Contains{}}}}},
		{"numeric", false, []part{{"numeric", 1, text{Numeric{}}}}},
		{"numeric:0.01", false, []part{{"numeric", 1, text{Numeric{Tolerance: 0.01}}}}},
		{"regex", false, []part{{"regex", 1, text{Regex{}}}}},
		{"tests", false, []part{{"tests", 1, tests{}}}},
		{"rank:numeric", true, []part{{"numeric", 1, text{Numeric{}}}}},
		{"rank: exact", true, []part{{"exact", 1, text{Exact{}}}}},
		{"judge", false, []part{{"judge", 1, judge{"", defaultJudgeTemplate, 10}}}},
		{"judge:gpt-4.1-mini", false, []part{{"judge", 1, judge{"gpt-4.1-mini", defaultJudgeTemplate, 10}}}},
		{"judge?scale=5:claude-sonnet-4-5", false, []part{{"judge", 1, judge{"claude-sonnet-4-5", defaultJudgeTemplate, 5}}}},
		{"tests*0.8+judge*0.2", false, []part{
			{"tests", 0.8, tests{}},
			{"judge", 0.2, judge{"", defaultJudgeTemplate, 10}},
		}},
		{"2*exact+numeric:0.5", false, []part{
			{"exact", 2, text{Exact{}}},
			{"numeric", 1, text{Numeric{Tolerance: 0.5}}},
		}},
		{"rank:tests + judge*0", true, []part{
			{"tests", 1, tests{}},
			{"judge", 0, judge{"", defaultJudgeTemplate, 10}},
		}},
	}
	for _, tt := range tests {
		got, err := Compile(tt.spec)
		require.NoError(t, err, "Compile(%q)", tt.spec)
		assert.Equal(t, tt.rank, got.rank, "Compile(%q) rank", tt.spec)
		assert.Equal(t, tt.parts, got.parts, "Compile(%q) = %v, want %v", tt.spec, got.parts, tt.parts)
	}
}

func TestCompileRegexRunsToTheEnd(t *testing.T) {
	tests := []struct{ spec, pattern string }{
		{`regex:^\d+$`, `^\d+$`},
		{`regex:(a|b)+c*`, `(a|b)+c*`},
		{`0.5*exact + 0.5*regex:^a+b$ `, `^a+b$`},
		{`(regex:x+)*2 + exact`, `x+`},
	}
	for _, tt := range tests {
		p, err := Compile(tt.spec)
		require.NoError(t, err, "Compile(%q)", tt.spec)
		var re Regex
		for _, pt := range p.parts {
			if r, ok := pt.scorer.(text).Rubric.(Regex); ok {
				re = r
			}
		}
		require.NotNil(t, re.Pattern, "Compile(%q) has no regex part", tt.spec)
		assert.Equal(t, tt.pattern, re.Pattern.String(), "Compile(%q) pattern", tt.spec)
	}
}

func TestCompileJudgeTemplate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "grade.tmpl")
	require.NoError(t, os.WriteFile(good, []byte("Q: {{.Prompt}}\nA: {{.Answer}}\nScore 1-5."), 0o644))
	misspelt := filepath.Join(dir, "misspelt.tmpl")
	require.NoError(t, os.WriteFile(misspelt, []byte("{{.Answr}}"), 0o644))
	unclosed := filepath.Join(dir, "unclosed.tmpl")
	require.NoError(t, os.WriteFile(unclosed, []byte("{{if .Answer}}"), 0o644))

	p, err := Compile("judge?template=" + good + "&scale=5:gpt-4.1")
	require.NoError(t, err)
	j := p.parts[0].scorer.(judge)
	assert.Equal(t, "gpt-4.1", j.model)
	assert.Equal(t, 5.0, j.scale)
	assert.NotSame(t, defaultJudgeTemplate, j.prompt)

	for _, tt := range []struct{ path, want string }{
		{misspelt, "can't evaluate field Answr"},
		{unclosed, "unexpected EOF"},
		{filepath.Join(dir, "missing.tmpl"), "no such file"},
	} {
		_, err := Compile("judge?template=" + tt.path)
		require.Error(t, err, "template %s", tt.path)
		assert.Contains(t, err.Error(), "judge template", "template %s", tt.path)
		assert.Contains(t, err.Error(), tt.want, "template %s", tt.path)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		spec string
		want string
	}{
		{"fuzzy", `unknown rubric "fuzzy" (valid: exact, numeric`},
		{"", `unknown rubric ""`},
		{"exact:1", `unknown rubric "exact:1"`},
		{"tests:x", `unknown rubric "tests:x"`},
		{"numeric:abc", `tolerance "abc"`},
		{"numeric:-1", `tolerance "-1"`},
		{"numeric:NaN", `tolerance "NaN"`},
		{"regex:(", "missing closing )"},
		{"rank:nope", `rubric "rank:nope": unknown rubric "nope"`},
		{"exact+fuzzy", `rubric "exact+fuzzy": unknown rubric "fuzzy"`},
		{"exact+", `unknown rubric ""`},
		{"+exact", `unknown rubric ""`},
		{"exact tests", `unexpected "tests" after exact: join parts with +`},
		{"-0.5*exact", `unknown rubric "-0.5"`},
		{"0.5 exact", "weight 0.5 must be followed by * and a rubric"},
		{"exact*", "expected a weight"},
		{"exact*tests", `expected a weight (a non-negative number) at "tests"`},
		{"0.5*exact*0.5", "exact has two weights"},
		{"1.2.3*exact", `weight "1.2.3" is not a number`},
		{"exact*0", "the weights sum to 0"},
		{"exact+exact", `two parts are named "exact"; label one, as in exact2=exact`},
		{"lint=exact + lint=numeric", `two parts are named "lint"`},
		{"exact?x=1", "exact takes no options"},
		{"judge:", "judge: names no model"},
		{"judge:gpt-4.1?template=t.txt", "options come before the model"},
		{"judge?scale=0", `judge scale "0" is not a positive number`},
		{"judge?template=/nonexistent/judge.tmpl", "judge template: open /nonexistent/judge.tmpl"},
		{"exact+rank:numeric", "rank: applies to the whole spec"},
		{"rank:rank:exact", "rank: applies to the whole spec"},
		{"(exact", "a parenthesis is not closed"},
		{"(exact+tests)", `parentheses hold one rubric, not "+tests" after exact`},
		{"exact)", `unexpected ")" after exact`},
	}
	for _, tt := range tests {
		p, err := Compile(tt.spec)
		require.Error(t, err, "Compile(%q) = %v, want an error", tt.spec, p)
		assert.Contains(t, err.Error(), tt.want, "Compile(%q)", tt.spec)
	}
}
