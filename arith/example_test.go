package arith_test

import (
	"fmt"

	"github.com/evalflow/evalflow/arith"
)

func ExampleFind() {
	expr, _ := arith.Find("What is 37 * (12 + 5)?")
	v, _ := arith.Eval(expr)
	fmt.Println(expr, "=", arith.Format(v))
	// Output: 37 * (12 + 5) = 629
}
