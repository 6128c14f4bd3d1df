package arith

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEval(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		{"1 + 2", 3},
		{"2 + 3 * 4", 14},
		{"(2 + 3) * 4", 20},
		{"10 - 4 - 3", 3},
		{"100 / 10 / 5", 2},
		{"-3 * -2", 6},
		{"-(4 + 1)", -5},
		{"+7", 7},
		{"1.5 * 4", 6},
		{".5 + .25", 0.75},
		{"37 * (12 + 5)", 629},
		{"  42  ", 42},
		{"2*(3+(4-1))/3", 4},
	}
	for _, tt := range tests {
		got, err := Eval(tt.expr)
		require.NoError(t, err, "Eval(%q)", tt.expr)
		assert.InDelta(t, tt.want, got, 1e-12, "Eval(%q) = %v, want %v", tt.expr, got, tt.want)
	}
}

func TestEvalErrors(t *testing.T) {
	for _, expr := range []string{
		"", "   ", "1 +", "* 2", "(1 + 2", "1 + 2)", "1 2", "2 ^ 3", "abc",
		"1..2", "3.", "()", "1 / 0", "5 / (2 - 2)",
		"1e5",
	} {
		v, err := Eval(expr)
		assert.Error(t, err, "Eval(%q) = %v, want an error", expr, v)
	}
	_, err := Eval("1 / 0")
	assert.ErrorIs(t, err, ErrDivisionByZero)
}

func TestEvalDeepNesting(t *testing.T) {
	expr := ""
	for range 10000 {
		expr += "("
	}
	_, err := Eval(expr + "1")
	assert.Error(t, err, "Eval of 10000 open parentheses should fail, not overflow the stack")
}

func TestFind(t *testing.T) {
	tests := []struct {
		text string
		want string
		ok   bool
	}{
		{"What is 37 * (12 + 5)?", "37 * (12 + 5)", true},
		{"A crate holds 12 boxes of 37 apples. How many in 14 crates? Compute: 12 * 37 * 14.", "12 * 37 * 14", true},
		{"First 1 + 1, then 2 * 3.", "2 * 3", true},
		{"What is -3 * 4?", "-3 * 4", true},
		{"Compute 3.5 / 0.5 now", "3.5 / 0.5", true},
		{"(see 3 + 4)", "3 + 4", true},
		{"What is 5 / 0?", "5 / 0", true},
		{"I have 12 apples and 3 pears.", "", false},
		{"hello world", "", false},
		{"id sample-0001", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Find(tt.text)
		assert.Equal(t, tt.ok, ok, "Find(%q) ok = %v, want %v", tt.text, ok, tt.ok)
		assert.Equal(t, tt.want, got, "Find(%q) = %q, want %q", tt.text, got, tt.want)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{6216, "6216"},
		{-5, "-5"},
		{0.5, "0.5"},
		{0.1 + 0.2, "0.3"},
		{1.0 / 3, "0.333333333"},
		{-0.0000000001, "0"},
		{1e20, "100000000000000000000"},
	}
	for _, tt := range tests {
		got := Format(tt.v)
		assert.Equal(t, tt.want, got, "Format(%v) = %q, want %q", tt.v, got, tt.want)
	}
}
