package tokenin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
	"github.com/evalflow/evalflow/trace"
	"github.com/evalflow/evalflow/trajectory"
)

// masked says how s's masks differ from the steps it holds: its prompt is
// its first step's, mask 0; then each step's completion, mask 1, with the
// tokens the next prompt added between them (the environment's), mask 0
// and log probability 0. "" when they do not.
func masked(traj trajectory.Trajectory, s trajectory.Sample) string {
	first := traj.Steps[s.Steps[0]].Tokens
	if !slices.Equal(s.PromptIDs, first.PromptIDs) || len(s.PromptMask) != len(s.PromptIDs) || slices.Contains(s.PromptMask, 1) {
		return "the prompt is not the first step's, masked out"
	}
	if len(s.CompletionMask) != len(s.CompletionIDs) || len(s.CompletionLogprobs) != len(s.CompletionIDs) {
		return "completion ids, mask and log probabilities differ in length"
	}
	pos := 0
	var prev *trajectory.Tokens
	for _, i := range s.Steps {
		t := traj.Steps[i].Tokens
		if prev != nil {
			env := len(t.PromptIDs) - len(prev.PromptIDs) - len(prev.CompletionIDs)
			if env < 0 || pos+env > len(s.CompletionIDs) {
				return fmt.Sprintf("step %d's prompt is shorter than the sample before it", i)
			}
			for k := pos; k < pos+env; k++ {
				if s.CompletionMask[k] != 0 || s.CompletionLogprobs[k] != 0 {
					return fmt.Sprintf("an environment token before step %d is not masked out", i)
				}
			}
			pos += env
		}
		n := len(t.CompletionIDs)
		if pos+n > len(s.CompletionIDs) || !slices.Equal(s.CompletionIDs[pos:pos+n], t.CompletionIDs) {
			return fmt.Sprintf("step %d's sampled tokens are not where the sample has them", i)
		}
		for k := pos; k < pos+n; k++ {
			if s.CompletionMask[k] != 1 {
				return fmt.Sprintf("a token step %d sampled has mask 0", i)
			}
		}
		pos += n
		prev = t
	}
	if pos != len(s.CompletionIDs) {
		return fmt.Sprintf("%d tokens after the last step's completion", len(s.CompletionIDs)-pos)
	}
	return ""
}

// checker reads samples back through the upstream's template and
// tokenizer.
type checker struct {
	up     *vllmtest.Server
	family chattemplate.Family
}

// readsAsConversation says how the text of s's ids (the upstream's
// /detokenize) differs from the conversation's: the template's text of
// its first call's messages and generation prompt, then for each step the
// text the model sampled (holding the answer the harness got), and
// between two steps the template's text of what the later call added
// after the earlier turn (tool results, the generation prompt), found
// after that turn's end token in the template's text of the later call.
// "" when it does not. The text is compared, not the ids: this holds the
// bridges' ids to the template's own text, independently of them.
func (c checker) readsAsConversation(traj trajectory.Trajectory, s trajectory.Sample, turns map[int]trace.Turn) (string, error) {
	first := turns[traj.Steps[s.Steps[0]].Turn]
	want, err := c.text(first.Request, len(first.Request.Messages), true)
	if err != nil {
		return "", err
	}
	for j, i := range s.Steps {
		turn := turns[traj.Steps[i].Turn]
		sampled, err := c.up.Detokenize(traj.Steps[i].Tokens.CompletionIDs)
		if err != nil {
			return "", err
		}
		if why := holdsAnswer(sampled, turn.Response.Message); why != "" {
			return fmt.Sprintf("step %d: %s", i, why), nil
		}
		want += sampled
		if j == len(s.Steps)-1 {
			break
		}
		next := turns[traj.Steps[s.Steps[j+1]].Turn]
		head, err := c.text(next.Request, len(turn.Request.Messages)+1, false)
		if err != nil {
			return "", err
		}
		full, err := c.text(next.Request, len(next.Request.Messages), true)
		if err != nil {
			return "", err
		}
		if !strings.HasSuffix(head, c.family.EndText+c.family.AfterText) {
			return fmt.Sprintf("step %d: the template's text of the turn does not end with %q", i, c.family.EndText), nil
		}
		at := nthIndex(full, c.family.EndText, strings.Count(head, c.family.EndText))
		if at < 0 {
			return fmt.Sprintf("step %d: the template's text of the next call does not close the turn", i), nil
		}
		want += full[at+len(c.family.EndText):]
	}
	got, err := c.up.Detokenize(append(slices.Clone(s.PromptIDs), s.CompletionIDs...))
	if err != nil {
		return "", err
	}
	if got != want {
		k := 0
		for k < min(len(got), len(want)) && got[k] == want[k] {
			k++
		}
		return fmt.Sprintf("the ids read %q where the conversation reads %q (at byte %d)", around(got, k), around(want, k), k), nil
	}
	return "", nil
}

// holdsAnswer says how sampled, a completion's text, misses the answer
// the harness got: its text and its tool calls' names.
func holdsAnswer(sampled string, m dialects.Message) string {
	if text := m.Text(); !strings.Contains(sampled, text) {
		return fmt.Sprintf("the sampled text %q does not hold the answer %q", sampled, text)
	}
	for _, tc := range m.ToolCalls {
		if !strings.Contains(sampled, tc.Name) {
			return fmt.Sprintf("the sampled text %q does not hold the call of %s", sampled, tc.Name)
		}
	}
	return ""
}

// text is the template's text of req's first n messages (with its tools),
// with the generation prompt when gen: the upstream's /tokenize, then its
// /detokenize.
func (c checker) text(req dialects.Request, n int, gen bool) (string, error) {
	body, err := dialects.Chat.EncodeRequest(req)
	if err != nil {
		return "", err
	}
	var wire struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return "", err
	}
	if n > len(wire.Messages) {
		return "", fmt.Errorf("%d messages asked of a call of %d", n, len(wire.Messages))
	}
	tr := vllmtest.TokenizeRequest{Messages: wire.Messages[:n], AddGenerationPrompt: gen}
	if len(wire.Tools) > 0 && string(wire.Tools) != "null" {
		tr.Tools = wire.Tools
	}
	ids, err := c.up.Tokenize(tr)
	if err != nil {
		return "", err
	}
	return c.up.Detokenize(ids)
}

// nthIndex is the index of the n-th (from 1) sub in s, or -1.
func nthIndex(s, sub string, n int) int {
	at := -1
	for ; n > 0; n-- {
		k := strings.Index(s[at+1:], sub)
		if k < 0 {
			return -1
		}
		at += 1 + k
	}
	return at
}

// around is s near byte k, for a message.
func around(s string, k int) string {
	return s[max(0, k-40):min(len(s), k+40)]
}
