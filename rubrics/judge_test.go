package rubrics

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

// fakeJudge answers with a reply or an error and remembers what it was asked.
type fakeJudge struct {
	reply  string
	err    error
	model  string
	prompt string
}

func (f *fakeJudge) Ask(_ context.Context, model, prompt string) (string, error) {
	f.model, f.prompt = model, prompt
	return f.reply, f.err
}

func TestJudgeReplies(t *testing.T) {
	tests := []struct {
		reply  string
		reward float64
	}{
		{"Score: 7/10", 0.7},
		{"The answer is right but terse.\n\nScore: 8/10", 0.8},
		{"**Score:** 9", 0.9},
		{"Final score: 6.5", 0.65},
		{"I give it a score of 3 out of 10.", 0.3},
		{"Score 4 / 5", 0.8},
		{`{"score": 7}`, 0.7},
		{"```json\n{\"reasoning\": \"close\", \"score\": 10}\n```", 1},
		{`{"score": "6/10"}`, 0.6},
		{`Reasoning first {"note": "x"} then {"score": 2}`, 0.2},
		{"10", 1},
		{"0", 0},
		{" 7/10. ", 0.7},
		{"It matches the reference on every point.\n7", 0.7},
		{"The score is low because the answer is wrong. Score: 1/10", 0.1},
	}
	p, err := Compile("judge")
	require.NoError(t, err)
	for _, tt := range tests {
		got, err := p.Score(context.Background(), Input{Task: verified, Answer: "42", Judge: &fakeJudge{reply: tt.reply}})
		require.NoError(t, err, "reply %q", tt.reply)
		assert.InDelta(t, tt.reward, got.Reward, 1e-12, "reply %q = %v, want %v", tt.reply, got.Reward, tt.reward)
		assert.Equal(t, map[string]float64{"judge": got.Reward}, got.Metrics)
		assert.Equal(t, strings.Join(strings.Fields(tt.reply), " "), got.Detail, "the reply is kept in the detail")
	}
}

func TestJudgeFailures(t *testing.T) {
	down := errors.New("upstream 503")
	tests := []struct {
		name   string
		judge  *fakeJudge
		reason string
	}{
		{"call fails", &fakeJudge{err: down}, "judge call failed"},
		{"garbage", &fakeJudge{reply: "I cannot grade this."}, `no score in judge reply "I cannot grade this."`},
		{"empty", &fakeJudge{reply: ""}, "no score"},
		{"out of range", &fakeJudge{reply: "Score: 12/10"}, "score 12 is not between 0 and 10"},
		{"negative", &fakeJudge{reply: "-3"}, "score -3 is not between 0 and 10"},
		{"JSON out of range", &fakeJudge{reply: `{"score": 11}`}, "score 11 is not between 0 and 10"},
		{"no scale", &fakeJudge{reply: "Score: 3/0"}, "score 3/0 has no scale"},
	}
	p, err := Compile("judge")
	require.NoError(t, err)
	for _, tt := range tests {
		_, err := p.Score(context.Background(), Input{Task: verified, Judge: tt.judge})
		var se *ScoringError
		require.ErrorAs(t, err, &se, "%s: %v, want a *ScoringError", tt.name, err)
		assert.Equal(t, "judge", se.Part, tt.name)
		assert.Contains(t, se.Reason, tt.reason, tt.name)
		if tt.judge.err != nil {
			assert.ErrorIs(t, err, tt.judge.err, tt.name)
		}
	}
}

func TestJudgeDetailIsShort(t *testing.T) {
	reply := strings.Repeat("The answer considers many things. ", 100) + "Score: 6/10"
	p, err := Compile("judge")
	require.NoError(t, err)
	got, err := p.Score(context.Background(), Input{Task: verified, Judge: &fakeJudge{reply: reply}})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(got.Detail), judgeDetailLimit+len(" … "))
	assert.True(t, strings.HasPrefix(got.Detail, "The answer considers"), got.Detail)
	assert.True(t, strings.HasSuffix(got.Detail, "Score: 6/10"), got.Detail)
}

func TestJudgePrompt(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		in       Input
		model    string
		contains []string
		excludes []string
	}{
		{"default model, reference", "judge", Input{Task: verified, Answer: "It is 42."}, "",
			[]string{"Fix the failing test.", "## Reference answer\n42", "## The assistant's final answer\nIt is 42.",
				"and agrees with the reference answer", "Score: N/10", `{"score": N}`}, nil},
		{"named model, no reference", "judge:gpt-4.1-mini", Input{Task: tasksets.Task{Prompt: "Write a haiku."}, Answer: "Autumn moonlight"}, "gpt-4.1-mini",
			[]string{"Write a haiku.", "Autumn moonlight"}, []string{"Reference", "agrees with"}},
		{"answer from the transcript", "judge", Input{Task: tasksets.Task{Prompt: "2+2?"},
			Transcript: []Message{{Role: "user", Text: "2+2?"}, {Role: "assistant", Text: "4, I think."}, {Role: "tool", Text: "ok"}}}, "",
			[]string{"## The assistant's final answer\n4, I think."}, nil},
		{"no answer", "judge", Input{Task: tasksets.Task{Prompt: "2+2?"}}, "", []string{"(no answer)"}, nil},
		{"messages as the prompt", "judge", Input{Task: tasksets.Task{Messages: []tasksets.Message{
			{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Name a prime."}}}, Answer: "7"}, "",
			[]string{"system: Be brief.\n\nuser: Name a prime."}, nil},
	}
	for _, tt := range tests {
		p, err := Compile(tt.spec)
		require.NoError(t, err)
		j := &fakeJudge{reply: "Score: 5/10"}
		tt.in.Judge = j
		_, err = p.Score(context.Background(), tt.in)
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.model, j.model, tt.name)
		for _, s := range tt.contains {
			assert.Contains(t, j.prompt, s, "%s: prompt %q", tt.name, j.prompt)
		}
		for _, s := range tt.excludes {
			assert.NotContains(t, j.prompt, s, "%s: prompt %q", tt.name, j.prompt)
		}
	}
}

func TestJudgeCustomTemplate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "style.tmpl")
	tmpl := "Rate the style of this conversation from 1 to 5.\n{{.Conversation}}\n" +
		"Tests: {{if .Verdict}}{{.Verdict.Reward}}{{else}}none{{end}}. Task {{.Task.ID}}."
	require.NoError(t, os.WriteFile(path, []byte(tmpl), 0o644))
	p, err := Compile("style=judge?template=" + path + "&scale=5:claude-haiku-4-5")
	require.NoError(t, err)

	j := &fakeJudge{reply: "4"}
	got, err := p.Score(context.Background(), Input{Task: verified, Verdict: &Verdict{Reward: 1},
		Transcript: []Message{{Role: "user", Text: "Fix it."}, {Role: "assistant", Text: "call edit(main.go)"}}, Judge: j})
	require.NoError(t, err)
	assert.Equal(t, "claude-haiku-4-5", j.model)
	assert.Equal(t, "Rate the style of this conversation from 1 to 5.\nuser: Fix it.\n\nassistant: call edit(main.go)\nTests: 1. Task fix-bug.", j.prompt)
	assert.Equal(t, 0.8, got.Reward, "4 out of a scale of 5")
	assert.Equal(t, map[string]float64{"style": 0.8}, got.Metrics)
}
