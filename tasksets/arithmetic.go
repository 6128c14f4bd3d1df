package tasksets

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/evalflow/evalflow/arith"
)

// Arithmetic is a generated taskset of arithmetic questions. Task i is a pure
// function of (Seed, i), so it needs no storage and any worker can build any
// task; only the tasks asked for are built.
type Arithmetic struct {
	Seed uint64
	// Size makes the set finite; 0 means Infinite.
	Size int64
}

var _ Taskset = Arithmetic{}

// Len is Size, or Infinite when Size is 0.
func (a Arithmetic) Len() int64 {
	if a.Size > 0 {
		return a.Size
	}
	return Infinite
}

// Task builds task i.
func (a Arithmetic) Task(ctx context.Context, i int64) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	if i < 0 || (a.Size > 0 && i >= a.Size) {
		return Task{}, fmt.Errorf("arithmetic: task %d out of range [0, %d)", i, a.Len())
	}
	expr, answer := arith.Generate(a.Seed, uint64(i))
	info, err := json.Marshal(map[string]string{"expression": expr})
	if err != nil {
		return Task{}, fmt.Errorf("arithmetic: encode info: %w", err)
	}
	return Task{
		ID:     fmt.Sprintf("arithmetic-%d-%d", a.Seed, i),
		Prompt: fmt.Sprintf("What is %s?", expr),
		Answer: answer,
		Info:   info,
	}, nil
}

// parseArithmetic reads the query of an "arithmetic?seed=N&size=N" ref.
func parseArithmetic(query string) (Arithmetic, error) {
	q, err := url.ParseQuery(query)
	if err != nil {
		return Arithmetic{}, fmt.Errorf("arithmetic: bad query %q: %w", query, err)
	}
	var a Arithmetic
	for key, vals := range q {
		v := vals[len(vals)-1]
		switch key {
		case "seed":
			if a.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
				return Arithmetic{}, fmt.Errorf("arithmetic: seed %q is not a non-negative integer", v)
			}
		case "size":
			if a.Size, err = strconv.ParseInt(v, 10, 64); err != nil || a.Size <= 0 {
				return Arithmetic{}, fmt.Errorf("arithmetic: size %q is not a positive integer", v)
			}
		default:
			return Arithmetic{}, fmt.Errorf("arithmetic: unknown parameter %q (want seed, size)", key)
		}
	}
	return a, nil
}
