package arith

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrDivisionByZero is returned by Eval when an expression divides by zero.
var ErrDivisionByZero = errors.New("division by zero")

// maxDepth bounds parenthesis and unary-minus nesting so hostile input cannot
// exhaust the stack.
const maxDepth = 200

// Eval evaluates an arithmetic expression of decimal numbers, + - * /,
// parentheses and unary minus, with the usual precedence.
func Eval(expr string) (float64, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return 0, err
	}
	v, _, err := evalTokens(toks)
	return v, err
}

// evalTokens parses toks as one whole expression and also reports how many
// binary operators it contains.
func evalTokens(toks []token) (float64, int, error) {
	if len(toks) == 0 {
		return 0, 0, errors.New("empty expression")
	}
	p := parser{toks: toks}
	v, err := p.expr(0)
	if err != nil {
		return 0, 0, err
	}
	if p.pos < len(p.toks) {
		return 0, 0, fmt.Errorf("unexpected %q at offset %d", p.toks[p.pos].text, p.toks[p.pos].off)
	}
	if p.divZero {
		return 0, p.binops, ErrDivisionByZero
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, 0, errors.New("result out of range")
	}
	return v, p.binops, nil
}

// parser is a recursive-descent parser over tokens:
//
//	expr   = term { ("+"|"-") term }
//	term   = factor { ("*"|"/") factor }
//	factor = "-" factor | "+" factor | number | "(" expr ")"
type parser struct {
	toks   []token
	pos    int
	binops int
	// divZero records a division by zero; parsing goes on so that Find can
	// still tell a well-formed "5 / 0" from garbage.
	divZero bool
}

func (p *parser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

func (p *parser) expr(depth int) (float64, error) {
	return p.leftAssoc(depth, "+", "-", p.term, func(op string, v, r float64) float64 {
		if op == "+" {
			return v + r
		}
		return v - r
	})
}

func (p *parser) term(depth int) (float64, error) {
	return p.leftAssoc(depth, "*", "/", p.factor, func(op string, v, r float64) float64 {
		switch {
		case op == "*":
			return v * r
		case r == 0:
			p.divZero = true
			return v
		}
		return v / r
	})
}

// leftAssoc parses operands joined by the operators op1 and op2, of one
// precedence, from the left: operand (op operand)*.
func (p *parser) leftAssoc(depth int, op1, op2 string, operand func(int) (float64, error), apply func(op string, v, r float64) float64) (float64, error) {
	v, err := operand(depth)
	if err != nil {
		return 0, err
	}
	for {
		t, ok := p.peek()
		if !ok || (t.text != op1 && t.text != op2) {
			return v, nil
		}
		p.pos++
		p.binops++
		r, err := operand(depth)
		if err != nil {
			return 0, err
		}
		v = apply(t.text, v, r)
	}
}

func (p *parser) factor(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, errors.New("expression nested too deeply")
	}
	t, ok := p.peek()
	if !ok {
		return 0, errors.New("unexpected end of expression")
	}
	p.pos++
	switch {
	case t.text == "-":
		v, err := p.factor(depth + 1)
		return -v, err
	case t.text == "+":
		return p.factor(depth + 1)
	case t.text == "(":
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		c, ok := p.peek()
		if !ok || c.text != ")" {
			return 0, fmt.Errorf("missing ) for ( at offset %d", t.off)
		}
		p.pos++
		return v, nil
	case t.number:
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q: %w", t.text, err)
		}
		return v, nil
	default:
		return 0, fmt.Errorf("unexpected %q at offset %d", t.text, t.off)
	}
}
