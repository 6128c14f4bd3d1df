package arith

import (
	"math"
	"strconv"
)

// Format renders v the way answers are written: integers without a decimal
// point, other values rounded to 9 decimal places so float noise such as
// 0.1+0.2 = 0.30000000000000004 does not leak into answers.
func Format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	r := math.Round(v*1e9) / 1e9
	if r == 0 {
		return "0" // not "-0"
	}
	if r == math.Trunc(r) {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
