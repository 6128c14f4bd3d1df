package rubrics_test

import (
	"fmt"

	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/tasksets"
)

func ExampleParse() {
	r, err := rubrics.Parse("numeric")
	if err != nil {
		panic(err)
	}
	s := r.Score(tasksets.Task{Answer: "6216"}, "So the crates hold 6,216 apples.")
	fmt.Println(s.Reward, s.Detail)
	// Output: 1 got 6216, want 6216
}
