package rubrics

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Numeric passes when the last number in the answer is within Tolerance of
// the task's answer. If the answer has a \boxed{...}, the last box is read
// instead of the whole text.
type Numeric struct {
	// Tolerance is the absolute difference allowed.
	Tolerance float64
}

// Score implements Rubric.
func (n Numeric) Score(task tasksets.Task, answer string) Score {
	if strings.TrimSpace(task.Answer) == "" {
		return noAnswer
	}
	want, ok := LastNumber(task.Answer)
	if !ok {
		return Score{Detail: fmt.Sprintf("task answer %q is not a number", clip(task.Answer))}
	}
	got, ok := LastNumber(answer)
	if !ok {
		return Score{Detail: "no number in answer"}
	}
	// A relative epsilon absorbs float noise such as 0.1+0.2 at tolerance 0.
	slack := n.Tolerance + 1e-9*math.Max(1, math.Abs(want))
	pass := math.Abs(got-want) <= slack
	return binary(pass, fmt.Sprintf("got %s, want %s", fmtNum(got), fmtNum(want)))
}

// number matches a decimal with optional sign and thousands separators.
var number = regexp.MustCompile(`[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-−]?\.\d+`)

// LastNumber returns the last number written in s (or in its last
// \boxed{...}), accepting "6,216", "-3", "−3", "2.5" and ".5". A minus sign
// right after a letter or digit is a hyphen, not a sign: "pages 3-4" gives 4.
func LastNumber(s string) (float64, bool) {
	if box, ok := lastBoxed(s); ok {
		s = box
	}
	locs := number.FindAllStringIndex(s, -1)
	if len(locs) == 0 {
		return 0, false
	}
	loc := locs[len(locs)-1]
	text := s[loc[0]:loc[1]]
	neg := false
	if strings.HasPrefix(text, "-") || strings.HasPrefix(text, "−") {
		sign := len("-")
		if text[0] != '-' {
			sign = len("−")
		}
		neg = loc[0] == 0 || !isWordByte(s[loc[0]-1])
		text = text[sign:]
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", ""), 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func isWordByte(b byte) bool {
	return b == '_' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

// lastBoxed returns the content of the last \boxed{...}, braces balanced.
func lastBoxed(s string) (string, bool) {
	const open = `\boxed{`
	i := strings.LastIndex(s, open)
	if i < 0 {
		return "", false
	}
	start := i + len(open)
	depth := 1
	for j := start; j < len(s); j++ {
		switch s[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[start:j], true
			}
		}
	}
	return "", false
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
