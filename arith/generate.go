package arith

import (
	"fmt"
	"strconv"
)

// Generate returns task i of a generated arithmetic set: an expression such
// as "37 * (12 + 5)" and its answer formatted by Format. It is a pure function
// of (seed, i). Answers are integers: divisions are always exact.
func Generate(seed, i uint64) (expr, answer string) {
	r := newRNG(seed, i)
	expr = binary(r, 1+r.intn(2)).String()
	v, err := Eval(expr)
	if err != nil {
		// Unreachable: the generator only builds well-formed, exact expressions.
		panic(fmt.Sprintf("arith: generated %q does not evaluate: %v", expr, err))
	}
	return expr, Format(v)
}

// node is a generated expression tree; a leaf has op 0.
type node struct {
	op   byte
	l, r *node
	v    int
}

func leaf(v int) *node { return &node{v: v} }

// operand returns a leaf or, while depth remains, sometimes a subexpression.
func operand(r *rng, depth int) *node {
	if depth <= 0 || r.intn(3) > 0 {
		return leaf(r.between(1, 99))
	}
	return binary(r, depth-1)
}

// binary returns an expression with an operator at its root.
func binary(r *rng, depth int) *node {
	switch r.intn(4) {
	case 0:
		return &node{op: '+', l: operand(r, depth), r: operand(r, depth)}
	case 1:
		return &node{op: '-', l: operand(r, depth), r: operand(r, depth)}
	case 2:
		// A small right factor keeps products readable.
		return &node{op: '*', l: operand(r, depth), r: leaf(r.between(2, 19))}
	default:
		d := r.between(2, 12)
		return &node{op: '/', l: leaf(d * r.between(2, 20)), r: leaf(d)}
	}
}

func prec(n *node) int {
	switch n.op {
	case '+', '-':
		return 1
	case '*', '/':
		return 2
	}
	return 3
}

// String writes n with only the parentheses precedence requires.
func (n *node) String() string {
	if n.op == 0 {
		return strconv.Itoa(n.v)
	}
	l, r := n.l.String(), n.r.String()
	if prec(n.l) < prec(n) {
		l = "(" + l + ")"
	}
	if prec(n.r) < prec(n) || (prec(n.r) == prec(n) && (n.op == '-' || n.op == '/')) {
		r = "(" + r + ")"
	}
	return l + " " + string(n.op) + " " + r
}
