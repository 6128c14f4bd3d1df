package tasksets

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/arith"
)

var update = flag.Bool("update", false, "rewrite data/sample.jsonl")

func TestSample(t *testing.T) {
	want := generateSample(256)
	if *update {
		require.NoError(t, os.WriteFile("data/sample.jsonl", want, 0o644))
	}
	assert.True(t, bytes.Equal(want, sampleData),
		"data/sample.jsonl is stale; run: go test ./tasksets -run TestSample -update")

	ts, err := Open("sample")
	require.NoError(t, err)
	require.GreaterOrEqual(t, ts.Len(), int64(256))
	ids := map[string]bool{}
	for i := range ts.Len() {
		task, err := ts.Task(context.Background(), i)
		require.NoError(t, err)
		assert.False(t, ids[task.ID], "duplicate id %q", task.ID)
		ids[task.ID] = true

		var info struct{ Expression string }
		require.NoError(t, json.Unmarshal(task.Info, &info), "task %s info", task.ID)
		v, err := arith.Eval(info.Expression)
		require.NoError(t, err, "task %s: Eval(%q)", task.ID, info.Expression)
		assert.Equal(t, arith.Format(v), task.Answer, "task %s: Eval(%q)", task.ID, info.Expression)

		found, ok := arith.Find(task.Prompt)
		assert.True(t, ok, "task %s: Find(%q) found nothing", task.ID, task.Prompt)
		assert.Equal(t, info.Expression, found, "task %s: Find(%q)", task.ID, task.Prompt)
	}
}

// generateSample builds the bundled sample. It uses its own splitmix64 so the
// file stays reproducible whatever math/rand does.
func generateSample(n int) []byte {
	r := sampleRand(2026)
	var buf bytes.Buffer
	for i := range n {
		tmpl := sampleTemplates[i%len(sampleTemplates)]
		story, expr := tmpl(&r)
		v, err := arith.Eval(expr)
		if err != nil {
			panic(fmt.Sprintf("sample template %d: Eval(%q): %v", i%len(sampleTemplates), expr, err))
		}
		ending := sampleEndings[(i/len(sampleTemplates))%len(sampleEndings)]
		info, err := json.Marshal(map[string]string{"expression": expr})
		if err != nil {
			panic(err)
		}
		line, err := json.Marshal(Task{
			ID:     fmt.Sprintf("sample-%04d", i+1),
			Prompt: story + " " + fmt.Sprintf(ending, expr),
			Answer: arith.Format(v),
			Info:   info,
		})
		if err != nil {
			panic(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

type sampleRand uint64

func (r *sampleRand) between(lo, hi int) int {
	*r += 0x9E3779B97F4A7C15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return lo + int(z%uint64(hi-lo+1))
}

var sampleEndings = []string{
	"Compute: %s.",
	"(That is: %s.)",
	"Work it out as %s.",
	"Hint: evaluate %s.",
}

var sampleTemplates = []func(r *sampleRand) (story, expr string){
	func(r *sampleRand) (string, string) {
		a, b, c := r.between(2, 24), r.between(5, 60), r.between(2, 20)
		return fmt.Sprintf("A crate holds %d boxes of %d apples. How many apples are there in %d crates?", a, b, c),
			fmt.Sprintf("%d * %d * %d", a, b, c)
	},
	func(r *sampleRand) (string, string) {
		a := r.between(20, 200)
		b, c := r.between(1, a-1), r.between(1, 90)
		return fmt.Sprintf("Maria had %d stickers. She gave away %d and then bought %d more. How many stickers does she have now?", a, b, c),
			fmt.Sprintf("%d - %d + %d", a, b, c)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(40, 300), r.between(2, 12)
		return fmt.Sprintf("A train travels at %d km per hour for %d hours. How many kilometres does it cover?", a, b),
			fmt.Sprintf("%d * %d", a, b)
	},
	func(r *sampleRand) (string, string) {
		b, q := r.between(2, 15), r.between(2, 30)
		return fmt.Sprintf("%d cookies are shared equally among %d children. How many cookies does each child get?", b*q, b),
			fmt.Sprintf("%d / %d", b*q, b)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(2, 15), r.between(2, 9)
		c := []int{50, 100, 200}[r.between(0, 2)]
		for a*b > c {
			b--
		}
		return fmt.Sprintf("Pens cost %d dollars each. Tom buys %d pens and pays with a %d dollar bill. How much change does he get?", a, b, c),
			fmt.Sprintf("%d - %d * %d", c, a, b)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(3, 80), r.between(3, 80)
		return fmt.Sprintf("A rectangle is %d cm long and %d cm wide. What is its perimeter in centimetres?", a, b),
			fmt.Sprintf("2 * (%d + %d)", a, b)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(4, 30), r.between(10, 50)
		c := r.between(1, a*b-1)
		return fmt.Sprintf("A library has %d shelves with %d books on each. %d books are checked out. How many books are still on the shelves?", a, b, c),
			fmt.Sprintf("%d * %d - %d", a, b, c)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(-5, 25), r.between(3, 40)
		return fmt.Sprintf("At noon it was %d degrees. By midnight the temperature had dropped by %d degrees. What was the temperature at midnight?", a, b),
			fmt.Sprintf("%d - %d", a, b)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(5, 60), r.between(3, 20)
		c := r.between(1, a*b)
		return fmt.Sprintf("Sam saves %d dollars a week for %d weeks, then spends %d dollars on a bike. How much money does he have left?", a, b, c),
			fmt.Sprintf("%d * %d - %d", a, b, c)
	},
	func(r *sampleRand) (string, string) {
		c, q := r.between(2, 12), r.between(3, 25)
		a := r.between(1, c*q-1)
		return fmt.Sprintf("A baker makes %d loaves in the morning and %d in the afternoon, and packs them in bags of %d. How many bags does she fill?", a, c*q-a, c),
			fmt.Sprintf("(%d + %d) / %d", a, c*q-a, c)
	},
	func(r *sampleRand) (string, string) {
		b, q := r.between(2, 25), r.between(2, 40)
		return fmt.Sprintf("An empty tank holds %d litres and fills at %d litres per minute. How many minutes until it is full?", b*q, b),
			fmt.Sprintf("%d / %d", b*q, b)
	},
	func(r *sampleRand) (string, string) {
		p := fmt.Sprintf("%d.%d", r.between(1, 19), []int{25, 5, 75}[r.between(0, 2)])
		n := r.between(2, 12)
		return fmt.Sprintf("A ticket costs %s dollars. How much do %d tickets cost in dollars?", p, n),
			fmt.Sprintf("%s * %d", p, n)
	},
	func(r *sampleRand) (string, string) {
		a, b, c, d := r.between(2, 20), r.between(5, 40), r.between(2, 20), r.between(5, 40)
		return fmt.Sprintf("A garden has %d rows of %d tulips and %d rows of %d roses. How many flowers grow in it?", a, b, c, d),
			fmt.Sprintf("%d * %d + %d * %d", a, b, c, d)
	},
	func(r *sampleRand) (string, string) {
		a, b, c := r.between(2, 25), []int{200, 400, 800}[r.between(0, 2)], r.between(10, 999)
		return fmt.Sprintf("A runner completes %d laps of a %d metre track and then jogs %d more metres. How far did she run in metres?", a, b, c),
			fmt.Sprintf("%d * %d + %d", a, b, c)
	},
	func(r *sampleRand) (string, string) {
		g, k := r.between(2, 8), r.between(3, 12)
		return fmt.Sprintf("A class of %d students splits into teams of %d. How many teams are there?", g*k, g),
			fmt.Sprintf("%d / %d", g*k, g)
	},
	func(r *sampleRand) (string, string) {
		a, b := r.between(10, 99), r.between(10, 99)
		c := 3*r.between(10, 99) - a - b
		for c < 1 {
			c += 3
		}
		return fmt.Sprintf("Three friends scored %d, %d and %d points. What was their average score?", a, b, c),
			fmt.Sprintf("(%d + %d + %d) / 3", a, b, c)
	},
}
