package mock_test

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
)

// judgePrompt is a judge's prompt as evalflow's default template writes it.
func judgePrompt(reference, answer string) string {
	p := "You are grading the final answer an AI assistant gave to a task.\n\n## Task\ncount-turns: what is 37 * (12 + 5)?\n"
	if reference != "" {
		p += "\n## Reference answer\n" + reference + "\n"
	}
	return p + "\n## The assistant's final answer\n" + answer + "\n\nGrade how well the final answer solves the task, from 0 to 10. End with \"Score: N/10\".\n"
}

// A judge's prompt is graded, the same way every time, by the arithmetic
// model and a scripted one alike (the script has a line for this task).
func TestMockJudges(t *testing.T) {
	_, client := newServer(t, mock.Config{Script: "testdata/script.jsonl"})
	tests := []struct {
		reference, answer, want string
	}{
		{"629", "The answer is 629.", "Score: 10/10"},
		{"6,216", "So it is 6216", "Score: 10/10"},
		{"Paris", "It is paris.", "Score: 10/10"},
		{"629", "The answer is 630.", "Score: 0/10"},
		{"629", "(no answer)", "Score: 0/10"},
		{"Paris", "Lyon", "Score: 0/10"},
		{"", "The answer is 629.", "Score: 5/10"},
	}
	for _, tt := range tests {
		for range 2 {
			resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model:    "mock",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(judgePrompt(tt.reference, tt.answer))},
			})
			require.NoError(t, err)
			require.Len(t, resp.Choices, 1)
			assert.Contains(t, resp.Choices[0].Message.Content, tt.want, "reference %q, answer %q", tt.reference, tt.answer)
		}
	}
}
