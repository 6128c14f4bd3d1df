package arith

import "fmt"

// token is one lexeme of an expression: a number or a one-character operator.
type token struct {
	text   string
	off    int // byte offset in the source
	end    int // byte offset just past the token
	number bool
}

// tokenize splits s into tokens, rejecting any character that is not part of
// an arithmetic expression.
func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isOperator(c):
			toks = append(toks, token{text: s[i : i+1], off: i, end: i + 1})
			i++
		case isDigit(c) || c == '.':
			j := scanNumber(s, i)
			if j < 0 {
				return nil, fmt.Errorf("bad number at offset %d", i)
			}
			toks = append(toks, token{text: s[i:j], off: i, end: j, number: true})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at offset %d", rune(s[i]), i)
		}
	}
	return toks, nil
}

// scanNumber returns the end of the decimal number starting at i, or -1 if
// there is none. A point belongs to the number only when a digit follows it,
// so the full stop in "Compute: 12 * 14." is not read as "14.".
func scanNumber(s string, i int) int {
	j, digits, point := i, 0, false
	for j < len(s) {
		switch {
		case isDigit(s[j]):
			digits++
		case s[j] == '.' && !point && j+1 < len(s) && isDigit(s[j+1]):
			point = true
		default:
			return endOf(j, digits)
		}
		j++
	}
	return endOf(j, digits)
}

func endOf(j, digits int) int {
	if digits == 0 {
		return -1
	}
	return j
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isOperator(c byte) bool {
	switch c {
	case '+', '-', '*', '/', '(', ')':
		return true
	}
	return false
}
