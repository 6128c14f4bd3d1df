// Package arith evaluates, finds, formats and generates small arithmetic
// expressions (+ - * / and parentheses over decimal numbers). The taskset
// generator, the offline mock model and the built-in agent's calculator tool
// share it, so all three agree on what an expression is and what it equals.
package arith
