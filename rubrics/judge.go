package rubrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/evalflow/evalflow/tasksets"
)

// JudgeData is what a judge's prompt template is executed with.
type JudgeData struct {
	// Task is the whole task, reference answer and all.
	Task tasksets.Task
	// Prompt is what the agent was asked: the task's prompt, or its
	// messages written out as "role: content".
	Prompt string
	// Reference is the task's reference answer, "" when it has none.
	Reference string
	// Answer is the agent's final answer: the harness's, else the last
	// assistant message of the transcript.
	Answer string
	// Transcript is the conversation; Conversation is the same written out
	// as "role: text" blocks.
	Transcript   []Message
	Conversation string
	// Verdict is the task's verifier's, nil when it has none.
	Verdict *Verdict
}

// DefaultJudgeTemplate is the prompt a judge part asks with unless its spec
// names a template file (judge?template=PATH).
const DefaultJudgeTemplate = `You are grading the final answer an AI assistant gave to a task.

## Task
{{.Prompt}}
{{if .Reference}}
## Reference answer
{{.Reference}}
{{end}}
## The assistant's final answer
{{if .Answer}}{{.Answer}}{{else}}(no answer){{end}}

Grade how well the final answer solves the task{{if .Reference}} and agrees with the reference answer{{end}}, from 0 (wrong or missing) to 10 (fully correct and complete). Explain briefly, then end with a line of the form "Score: N/10". You may instead reply with JSON only: {"score": N}.
`

var defaultJudgeTemplate = template.Must(template.New("judge").Option("missingkey=error").Parse(DefaultJudgeTemplate))

// judgeDetailLimit bounds the judge's reply kept in a Score's Detail.
const judgeDetailLimit = 200

// judge is the part that asks a model to grade the answer, reading a score
// out of N (scale, default 10) from its reply.
type judge struct {
	model  string
	prompt *template.Template
	scale  float64
}

func buildJudge(a args) (scorer, error) {
	j := judge{model: a.arg, prompt: defaultJudgeTemplate, scale: 10}
	if a.hasArg && a.arg == "" {
		return nil, errors.New("judge: names no model: write judge:MODEL, or judge for the default model")
	}
	if strings.ContainsAny(j.model, "?&=") {
		return nil, fmt.Errorf("judge model %q: options come before the model, as in judge?template=PATH:MODEL", j.model)
	}
	if v, ok := a.options["scale"]; ok {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("judge scale %q is not a positive number", v)
		}
		j.scale = s
	}
	if path, ok := a.options["template"]; ok {
		t, err := readTemplate(path)
		if err != nil {
			return nil, err
		}
		j.prompt = t
	}
	return j, nil
}

// readTemplate reads and parses a judge's prompt template, and executes it
// once on empty data so that a misspelt field is an error of the spec.
func readTemplate(path string) (*template.Template, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("judge template: %w", err)
	}
	t, err := template.New(path).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("judge template: %w", err)
	}
	if err := t.Execute(io.Discard, JudgeData{}); err != nil {
		return nil, fmt.Errorf("judge template: %w", err)
	}
	return t, nil
}

func (judge) check(in Input) error {
	if in.Judge == nil {
		return &ConfigError{Reason: "this worker has no judge model to ask"}
	}
	return nil
}

func (j judge) score(ctx context.Context, in Input) (Score, error) {
	var prompt strings.Builder
	if err := j.prompt.Execute(&prompt, judgeData(in)); err != nil {
		return Score{}, &ScoringError{Reason: "cannot write the judge's prompt", Err: err}
	}
	reply, err := in.Judge.Ask(ctx, j.model, prompt.String())
	if err != nil {
		return Score{}, &ScoringError{Reason: "judge call failed", Err: err}
	}
	score, err := parseJudgeScore(reply, j.scale)
	if err != nil {
		return Score{}, &ScoringError{Reason: fmt.Sprintf("%v in judge reply %q", err, clipMiddle(reply, judgeDetailLimit))}
	}
	return Score{Reward: score, Detail: clipMiddle(reply, judgeDetailLimit)}, nil
}

// judgeData is the template data of in.
func judgeData(in Input) JudgeData {
	d := JudgeData{Task: in.Task, Prompt: in.Task.Prompt, Reference: in.Task.Answer, Answer: in.Answer,
		Transcript: in.Transcript, Verdict: in.Verdict}
	if d.Prompt == "" {
		lines := make([]string, len(in.Task.Messages))
		for i, m := range in.Task.Messages {
			lines[i] = m.Role + ": " + m.Content
		}
		d.Prompt = strings.Join(lines, "\n\n")
	}
	blocks := make([]string, len(in.Transcript))
	for i, m := range in.Transcript {
		blocks[i] = m.Role + ": " + m.Text
		if m.Role == "assistant" && d.Answer == "" && i == lastAssistant(in.Transcript) {
			d.Answer = m.Text
		}
	}
	d.Conversation = strings.Join(blocks, "\n\n")
	return d
}

// lastAssistant is the index of the last assistant message, or -1.
func lastAssistant(ms []Message) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "assistant" {
			return i
		}
	}
	return -1
}

var (
	// scoreLine matches "Score: 7/10", "**Score:** 7", "a score of 9 out of 10".
	scoreLine = regexp.MustCompile(`(?i)\bscore\b[\s:=*#"']*(?:is\s+|of\s+)?[\s*]*(-?\d+(?:\.\d+)?)(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?`)
	// bareScore matches a reply or line that is only "7", "7/10" or "7.5.".
	bareScore = regexp.MustCompile(`^[\s*]*(-?\d+(?:\.\d+)?)(?:\s*/\s*(\d+(?:\.\d+)?))?[\s*.]*$`)
)

// parseJudgeScore reads a judge's score and normalizes it to [0, 1]: the
// "score" of a JSON object in the reply, else the last "Score: N[/M]", else
// a reply or last line that is only a number or N/M. N/M is N out of M;
// a bare N is out of scale.
func parseJudgeScore(reply string, scale float64) (float64, error) {
	if v, ok, err := jsonScore(reply, scale); ok {
		return v, err
	}
	if m := scoreLine.FindAllStringSubmatch(reply, -1); m != nil {
		return fraction(m[len(m)-1], scale)
	}
	lines := strings.Split(strings.TrimSpace(reply), "\n")
	for _, s := range []string{strings.TrimSpace(reply), lines[len(lines)-1]} {
		if m := bareScore.FindStringSubmatch(s); m != nil {
			return fraction(m, scale)
		}
	}
	return 0, errors.New("no score")
}

// jsonScore reads the first JSON object in reply with a "score" that is a
// number or a string such as "7" or "7/10"; ok is whether there is one.
func jsonScore(reply string, scale float64) (score float64, ok bool, err error) {
	for i := strings.IndexByte(reply, '{'); i >= 0; {
		var obj struct {
			Score json.RawMessage `json:"score"`
		}
		if json.NewDecoder(strings.NewReader(reply[i:])).Decode(&obj) == nil && obj.Score != nil {
			var v float64
			if json.Unmarshal(obj.Score, &v) == nil {
				score, err = outOf(v, scale)
				return score, true, err
			}
			var s string
			if json.Unmarshal(obj.Score, &s) == nil {
				if m := bareScore.FindStringSubmatch(s); m != nil {
					score, err = fraction(m, scale)
					return score, true, err
				}
			}
		}
		next := strings.IndexByte(reply[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return 0, false, nil
}

// fraction reads a match of N and optional M as N/M, or N/scale.
func fraction(m []string, scale float64) (float64, error) {
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, err
	}
	if len(m) > 2 && m[2] != "" {
		if scale, err = strconv.ParseFloat(m[2], 64); err != nil || scale == 0 {
			return 0, fmt.Errorf("score %s/%s has no scale", m[1], m[2])
		}
	}
	return outOf(n, scale)
}

// outOf is v out of scale, which must lie in [0, 1].
func outOf(v, scale float64) (float64, error) {
	r := v / scale
	if math.IsNaN(r) || r < 0 || r > 1 {
		return 0, fmt.Errorf("score %s is not between 0 and %s", fmtNum(v), fmtNum(scale))
	}
	return r, nil
}
