package rubrics_test

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/tasksets"
)

func ExampleCompile() {
	p, err := rubrics.Compile("numeric")
	if err != nil {
		panic(err)
	}
	s, err := p.Score(context.Background(), rubrics.Input{
		Task:   tasksets.Task{Answer: "6216"},
		Answer: "So the crates hold 6,216 apples.",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Reward, s.Detail)
	// Output: 1 got 6216, want 6216
}

func ExampleProgram_Score() {
	// The task's tests count for 80%, a judge model's grade for 20%.
	p, err := rubrics.Compile("tests*0.8 + judge*0.2")
	if err != nil {
		panic(err)
	}
	judge := rubrics.JudgeFunc(func(ctx context.Context, model, prompt string) (string, error) {
		return "Correct, but the patch also reformats an unrelated file.\nScore: 5/10", nil
	})
	s, err := p.Score(context.Background(), rubrics.Input{
		Task:    tasksets.Task{ID: "fix-parser", Prompt: "Make the parser tests pass.", Verify: "bash /tests/test.sh"},
		Verdict: &rubrics.Verdict{Reward: 1, Metrics: map[string]float64{"passed": 12, "failed": 0}},
		Judge:   judge,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("reward", s.Reward)
	for _, name := range slices.Sorted(maps.Keys(s.Metrics)) {
		fmt.Println(name, s.Metrics[name])
	}
	// Output:
	// reward 0.9
	// judge 0.5
	// tests 1
	// tests.failed 0
	// tests.passed 12
}

func ExampleProgram_Check() {
	p, err := rubrics.Compile("tests")
	if err != nil {
		panic(err)
	}
	// A task without a verifier cannot be scored by its tests: a
	// configuration error, found before any rollout runs.
	err = p.Check(rubrics.Input{Task: tasksets.Task{ID: "t1", Prompt: "2+2?", Answer: "4"}})
	fmt.Println(err)
	// Output: rubric tests: task "t1" has no verifier (no tests or verify command) to take a reward from
}
