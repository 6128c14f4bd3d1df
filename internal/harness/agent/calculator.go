package agent

import (
	"github.com/evalflow/evalflow/arith"
)

// calculate evaluates an arithmetic expression for the calculator tool.
func calculate(expression string) result {
	v, err := arith.Eval(expression)
	if err != nil {
		return failed("%v", err)
	}
	return result{text: arith.Format(v)}
}
