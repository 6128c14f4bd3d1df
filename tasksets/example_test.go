package tasksets_test

import (
	"context"
	"fmt"

	"github.com/evalflow/evalflow/tasksets"
)

func ExampleOpen() {
	ts, err := tasksets.Open("arithmetic?seed=7&size=100")
	if err != nil {
		panic(err)
	}
	t, err := ts.Task(context.Background(), 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(ts.Len(), t.ID, t.Prompt, t.Answer)
	// Output: 100 arithmetic-7-3 What is 56 / 4? 14
}
