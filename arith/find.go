package arith

import "errors"

// maxRunTokens bounds how much of one run Find searches, keeping it cheap on
// long number-heavy prompts.
const maxRunTokens = 64

// Find returns the last arithmetic expression in text (one with at least one
// binary operator), as written there: for "What is 37 * (12 + 5)?" it returns
// "37 * (12 + 5)". Among expressions ending at the same place it picks the
// longest. A well-formed expression that divides by zero still counts.
func Find(text string) (string, bool) {
	runs := runsOf(text)
	for r := len(runs) - 1; r >= 0; r-- {
		if s, ok := lastIn(text, runs[r]); ok {
			return s, true
		}
	}
	return "", false
}

// runsOf splits text into maximal runs of expression tokens; any character
// that cannot be part of an expression ends a run.
func runsOf(text string) [][]token {
	var runs [][]token
	var cur []token
	flush := func() {
		if len(cur) > 0 {
			runs = append(runs, cur)
			cur = nil
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case isOperator(c):
			cur = append(cur, token{text: text[i : i+1], off: i, end: i + 1})
			i++
		case isDigit(c) || c == '.':
			j := scanNumber(text, i)
			if j < 0 {
				flush()
				i++
				continue
			}
			cur = append(cur, token{text: text[i:j], off: i, end: j, number: true})
			i = j
		default:
			flush()
			i++
		}
	}
	flush()
	return runs
}

// lastIn returns the expression in toks that ends last, longest first.
func lastIn(text string, toks []token) (string, bool) {
	if len(toks) > maxRunTokens {
		toks = toks[len(toks)-maxRunTokens:]
	}
	for end := len(toks); end > 0; end-- {
		for start := 0; start < end; start++ {
			_, binops, err := evalTokens(toks[start:end])
			if (err == nil || errors.Is(err, ErrDivisionByZero)) && binops > 0 {
				return text[toks[start].off:toks[end-1].end], true
			}
		}
	}
	return "", false
}
