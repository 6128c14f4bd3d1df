package rubrics

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

// verified is a task scored by its verifier.
var verified = tasksets.Task{ID: "fix-bug", Prompt: "Fix the failing test.", Answer: "42", Verify: "bash /tests/test.sh"}

// replying is a Judge that always gives reply.
func replying(reply string) Judge {
	return JudgeFunc(func(context.Context, string, string) (string, error) { return reply, nil })
}

func TestTestsPart(t *testing.T) {
	tests := []struct {
		name    string
		verdict *Verdict
		reward  float64
		metrics map[string]float64
	}{
		{"passed", &Verdict{Reward: 1}, 1, map[string]float64{"tests": 1}},
		{"failed", &Verdict{Reward: 0}, 0, map[string]float64{"tests": 0}},
		{"partial with metrics", &Verdict{Reward: 0.75, Metrics: map[string]float64{"passed": 3, "failed": 1}}, 0.75,
			map[string]float64{"tests": 0.75, "tests.passed": 3, "tests.failed": 1}},
		{"beyond 1", &Verdict{Reward: 2.5}, 2.5, map[string]float64{"tests": 2.5}},
	}
	p, err := Compile("tests")
	require.NoError(t, err)
	for _, tt := range tests {
		got, err := p.Score(context.Background(), Input{Task: verified, Verdict: tt.verdict})
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.reward, got.Reward, "%s: reward", tt.name)
		assert.Equal(t, tt.metrics, got.Metrics, "%s: metrics", tt.name)
		assert.Contains(t, got.Detail, "verifier reward", tt.name)
	}

	verdict := &Verdict{Reward: 1, Metrics: map[string]float64{"passed": 3}}
	_, err = p.Score(context.Background(), Input{Task: verified, Verdict: verdict})
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"passed": 3}, verdict.Metrics, "Score leaves the verdict alone")
}

func TestWeighted(t *testing.T) {
	tests := []struct {
		spec    string
		in      Input
		reward  float64
		metrics map[string]float64
	}{
		{"tests*0.8+judge*0.2", Input{Task: verified, Verdict: &Verdict{Reward: 1}, Judge: replying("Score: 5/10")},
			0.9, map[string]float64{"tests": 1, "judge": 0.5}},
		{"0.5*exact + 0.5*numeric", Input{Task: verified, Answer: "The answer is 42."},
			0.5, map[string]float64{"exact": 0, "numeric": 1}},
		// Weights are normalized: 3 and 1 are 0.75 and 0.25.
		{"3*numeric + contains", Input{Task: verified, Answer: "41"},
			0, map[string]float64{"numeric": 0, "contains": 0}},
		{"3*numeric + exact", Input{Task: verified, Answer: "42"},
			1, map[string]float64{"numeric": 1, "exact": 1}},
		{"3*tests + exact", Input{Task: verified, Answer: "nope", Verdict: &Verdict{Reward: 1}},
			0.75, map[string]float64{"tests": 1, "exact": 0}},
		// A weight of 0 reports a part without counting it.
		{"exact + judge*0", Input{Task: verified, Answer: "42", Judge: replying("0")},
			1, map[string]float64{"exact": 1, "judge": 0}},
		{"tests + style=judge", Input{Task: verified, Verdict: &Verdict{Reward: 0.5, Metrics: map[string]float64{"passed": 1}}, Judge: replying(`{"score": 10}`)},
			0.75, map[string]float64{"tests": 0.5, "tests.passed": 1, "style": 1}},
		{"rank:tests*0.5 + 0.5*exact", Input{Task: verified, Answer: "42", Verdict: &Verdict{Reward: 0}},
			0.5, map[string]float64{"tests": 0, "exact": 1}},
	}
	for _, tt := range tests {
		p, err := Compile(tt.spec)
		require.NoError(t, err, "Compile(%q)", tt.spec)
		got, err := p.Score(context.Background(), tt.in)
		require.NoError(t, err, "%s: Score", tt.spec)
		assert.InDelta(t, tt.reward, got.Reward, 1e-12, "%s: Score = %v (%s), want %v", tt.spec, got.Reward, got.Detail, tt.reward)
		assert.Equal(t, tt.metrics, got.Metrics, "%s: metrics", tt.spec)
		for _, pt := range p.parts {
			assert.Contains(t, got.Detail, pt.name+" ", "%s: Detail %q names each part", tt.spec, got.Detail)
		}
	}
}

func TestDetail(t *testing.T) {
	p, err := Compile("numeric")
	require.NoError(t, err)
	got, err := p.Score(context.Background(), Input{Task: tasksets.Task{Answer: "6216"}, Answer: "So 6,216 apples."})
	require.NoError(t, err)
	assert.Equal(t, "got 6216, want 6216", got.Detail, "one part's detail is its own")

	p, err = Compile("exact*0.5 + numeric*0.5")
	require.NoError(t, err)
	got, err = p.Score(context.Background(), Input{Task: tasksets.Task{Answer: "6216"}, Answer: "So 6,216 apples."})
	require.NoError(t, err)
	assert.Equal(t, `exact 0: got "so 6,216 apples", want "6216"; numeric 1: got 6216, want 6216`, got.Detail)
}

func TestCheck(t *testing.T) {
	unverified := tasksets.Task{ID: "t1", Prompt: "2+2?", Answer: "4"}
	judge := replying("10")
	tests := []struct {
		spec string
		in   Input
		part string // the part at fault, "" when none is
		want string
	}{
		{"exact", Input{Task: unverified}, "", ""},
		{"tests", Input{Task: verified}, "", ""},
		{"tests", Input{Task: unverified}, "tests", `rubric tests: task "t1" has no verifier`},
		{"exact*0.5 + checks=tests", Input{Task: unverified}, "checks", `rubric checks: task "t1" has no verifier`},
		{"judge", Input{Task: unverified, Judge: judge}, "", ""},
		{"judge", Input{Task: unverified}, "judge", "rubric judge: this worker has no judge model to ask"},
		{"rank:tests+judge", Input{Task: verified}, "judge", "no judge model"},
	}
	for _, tt := range tests {
		p, err := Compile(tt.spec)
		require.NoError(t, err)
		err = p.Check(tt.in)
		if tt.part == "" {
			assert.NoError(t, err, "%s: Check", tt.spec)
			continue
		}
		_, scoreErr := p.Score(context.Background(), tt.in)
		for _, err := range []error{err, scoreErr} {
			var ce *ConfigError
			require.ErrorAs(t, err, &ce, "%s: %v, want a *ConfigError", tt.spec, err)
			assert.Equal(t, tt.part, ce.Part, tt.spec)
			assert.Contains(t, err.Error(), tt.want, tt.spec)
		}
	}
}

func TestTestsWithoutVerdict(t *testing.T) {
	p, err := Compile("tests")
	require.NoError(t, err)
	_, err = p.Score(context.Background(), Input{Task: verified})
	var se *ScoringError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "tests", se.Part)
	assert.EqualError(t, err, "rubric tests: the task's verifier gave no verdict")
}

func TestVerdictNotANumber(t *testing.T) {
	p, err := Compile("tests")
	require.NoError(t, err)
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		_, err = p.Score(context.Background(), Input{Task: verified, Verdict: &Verdict{Reward: v}})
		var se *ScoringError
		require.ErrorAs(t, err, &se, "reward %v", v)
		assert.Contains(t, err.Error(), "is not a number")
	}
}

func TestScoringErrorMessage(t *testing.T) {
	cause := errors.New("connection refused")
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'e'
	}
	tests := []struct {
		err  *ScoringError
		want string
	}{
		{&ScoringError{Part: "judge", Reason: "judge call failed", Err: cause}, "rubric judge: judge call failed: connection refused"},
		{&ScoringError{Part: "command", Reason: "exit status 2", Stderr: "  FAIL test_a\n  FAIL test_b\n"}, "rubric command: exit status 2; stderr: FAIL test_a FAIL test_b"},
		{&ScoringError{Part: "lint", Reason: "exit status 1", Stderr: string(long) + "the end"}, "rubric lint: exit status 1; stderr: …" + string(long[:293]) + "the end"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
	assert.ErrorIs(t, &ScoringError{Err: cause}, cause)
}
