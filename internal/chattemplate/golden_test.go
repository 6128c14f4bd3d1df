package chattemplate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type message struct {
	Role      string          `json:"role"`
	Content   *string         `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), path)
}

func conversations(t *testing.T) map[string][]message {
	var spec struct {
		Conversations []struct {
			Name     string    `json:"name"`
			Messages []message `json:"messages"`
		} `json:"conversations"`
	}
	readJSON(t, filepath.Join("testdata", "conversations.json"), &spec)
	out := map[string][]message{}
	for _, c := range spec.Conversations {
		out[c.Name] = c.Messages
	}
	return out
}

// The families' end ids are their tokenizers': each is the id transformers
// gives the end token's text, and the template closes an assistant turn
// with it.
func TestFamilyIDsAreTheTokenizers(t *testing.T) {
	for _, f := range Families {
		t.Run(f.Name, func(t *testing.T) {
			g, err := ReadGolden(filepath.Join("testdata", "goldens"), f)
			require.NoError(t, err)
			closed := 0
			for _, r := range g.Renders {
				if !r.Gen && strings.HasSuffix(r.Text, f.EndText+f.AfterText) {
					assert.Equal(t, append([]int32{f.End[0]}, f.After...), r.IDs[len(r.IDs)-1-len(f.After):], r.Variant())
					closed++
				}
			}
			assert.Positive(t, closed, "renders ending with %q", f.EndText)
		})
	}
}

// bridgeCase is an earlier assistant turn a of a conversation and the next
// call, the prompt of the assistant turn b after it, in one variant.
type bridgeCase struct {
	variant          string
	prompt, head     Render // the earlier turn's prompt; its messages and answer
	full             Render // the later call's prompt
	newMessages      []message
	sampled          []int32
	reRenderExtends  bool // the later prompt, rendered whole, extends prompt + answer
	bridged          []int32
	closed           bool
	why              string
	tailText         string
	newMessagesFound bool
}

// Against transformers' renders of each family: for every assistant turn
// followed by more messages and another call, the answer as the template
// renders it last is what the model sampled; re-rendering the later call
// breaks that prefix where the template re-renders history otherwise, and
// the bridge extends it exactly with the template's ids of the new
// messages and the generation prompt.
func TestBridgesAgainstTransformersRenders(t *testing.T) {
	convs := conversations(t)
	for _, f := range Families {
		t.Run(f.Name, func(t *testing.T) {
			g, err := ReadGolden(filepath.Join("testdata", "goldens"), f)
			require.NoError(t, err)
			cases := bridgeCases(t, f, g, convs)
			require.NotEmpty(t, cases)
			breaks, bridged, refused := 0, 0, 0
			for _, c := range cases {
				if !c.reRenderExtends {
					breaks++
				}
				if c.why != "" {
					refused++
					t.Logf("%s, turn at %d: text: %s", c.variant, c.head.K-1, c.why)
					continue
				}
				bridged++
				assert.False(t, c.closed, "%s: the template's own answer ends with its end token", c.variant)
				assert.Equal(t, c.sampled, c.bridged[:len(c.sampled)], "%s: the prompt extends what was sampled", c.variant)
				assert.True(t, c.newMessagesFound, "%s: the bridge's tail holds the new messages: %q", c.variant, c.tailText)
				assert.True(t, slices.Equal(c.full.IDs[len(c.full.IDs)-(len(c.bridged)-len(c.sampled)):], c.bridged[len(c.sampled):]),
					"%s: the tail is the template's own", c.variant)
				if c.reRenderExtends {
					assert.Equal(t, c.full.IDs, c.bridged, "%s: where the re-render extends the sample, the bridge is the re-render", c.variant)
				}
			}
			t.Logf("figure: %s: %d turns: the re-render breaks the prefix at %d; bridged %d, sent as text %d", f.Name, len(cases), breaks, bridged, refused)
			assert.Positive(t, bridged)
			if f.Name == Qwen3.Name {
				assert.Positive(t, breaks, "Qwen3's template re-renders history otherwise")
			} else {
				assert.Zero(t, breaks, "%s's template renders history as it rendered the last turn", f.Name)
			}
		})
	}
}

func bridgeCases(t *testing.T, f Family, g Golden, convs map[string][]message) []bridgeCase {
	byKey := map[string]Render{}
	variants := []string{}
	for _, r := range g.Renders {
		key := fmt.Sprintf("%s k=%d gen=%v", r.Variant(), r.K, r.Gen)
		byKey[key] = r
		if r.K == 1 && !r.Gen {
			variants = append(variants, r.Variant())
		}
	}
	var cases []bridgeCase
	for _, v := range variants {
		msgs := convs[strings.Fields(v)[0]]
		get := func(k int, gen bool) (Render, bool) {
			r, ok := byKey[fmt.Sprintf("%s k=%d gen=%v", v, k, gen)]
			return r, ok
		}
		for a := range msgs {
			b := nextAssistant(msgs, a+1)
			if msgs[a].Role != "assistant" || b < 0 || b == a+1 {
				continue
			}
			prompt, ok1 := get(a, true)
			head, ok2 := get(a+1, false)
			full, ok3 := get(b, true)
			if !ok1 || !ok2 || !ok3 || !slices.Equal(prompt.IDs, head.IDs[:min(len(prompt.IDs), len(head.IDs))]) {
				continue // the template does not render this variant, or the answer is not its prompt's continuation
			}
			c := bridgeCase{variant: v, prompt: prompt, head: head, full: full, newMessages: msgs[a+1 : b]}
			// What the model sampled: the answer as the template renders it
			// last, up to and with the end token.
			c.sampled = head.IDs[:len(head.IDs)-len(f.After)]
			c.reRenderExtends = len(full.IDs) >= len(c.sampled) && slices.Equal(full.IDs[:len(c.sampled)], c.sampled)
			c.bridged, c.closed, c.why = f.Bridge(c.sampled, head.IDs, full.IDs)
			c.tailText, c.newMessagesFound = tailOf(f, head.Text, full.Text, c.newMessages)
			cases = append(cases, c)
		}
	}
	return cases
}

func nextAssistant(msgs []message, from int) int {
	for i := from; i < len(msgs); i++ {
		if msgs[i].Role == "assistant" {
			return i
		}
	}
	return -1
}

// tailOf is the text of full after the earlier turn, found by text as
// Bridge finds it by id, and whether it holds every new message's content.
func tailOf(f Family, head, full string, newMessages []message) (string, bool) {
	n := strings.Count(head, f.EndText)
	rest := full
	for range n {
		i := strings.Index(rest, f.EndText)
		if i < 0 {
			return "", false
		}
		rest = rest[i+len(f.EndText):]
	}
	for _, m := range newMessages {
		// Llama 3.1's template trims a message's content.
		if m.Content != nil && !strings.Contains(rest, strings.TrimSpace(*m.Content)) {
			return rest, false
		}
	}
	return rest, true
}

// A turn cut at max_tokens has no end token: the bridge closes it with
// the template's, an id the model did not sample, and says so.
func TestBridgeClosesATruncatedTurn(t *testing.T) {
	f := Qwen3
	head := []int32{1, 2, 3, 151645, 198}
	full := []int32{1, 2, 9, 151645, 198, 7, 8}
	prompt, closed, why := f.Bridge([]int32{1, 2, 3, 4, 5}, head, full)
	require.Empty(t, why)
	assert.True(t, closed)
	assert.Equal(t, []int32{1, 2, 3, 4, 5, 151645, 198, 7, 8}, prompt)

	prompt, closed, why = f.Bridge([]int32{1, 2, 3, 151643}, head, full)
	require.Empty(t, why)
	assert.False(t, closed, "another end id of the family ends a turn too")
	assert.Equal(t, []int32{1, 2, 3, 151643, 198, 7, 8}, prompt)
}

// Where the template does not close the earlier turn as the family does,
// or the call adds nothing after it, the bridge says so rather than
// guessing.
func TestBridgeRefusesWhatItCannotPlace(t *testing.T) {
	f := DeepSeekV3
	_, _, why := f.Bridge([]int32{5, 1}, []int32{5, 6}, []int32{5, 6, 7})
	assert.Contains(t, why, "does not end with its end token")
	_, _, why = f.Bridge([]int32{5, 1}, []int32{5, 1}, []int32{5, 1})
	assert.Contains(t, why, "adds no message")
	_, _, why = Qwen3.Bridge([]int32{5, 151645}, []int32{5, 151645, 198}, []int32{5, 151645, 7})
	assert.Contains(t, why, "does not close the earlier turn")
}

func TestForModel(t *testing.T) {
	for name, want := range map[string]string{
		"Qwen/Qwen3-8B": "qwen3", "qwen3-coder-30b": "qwen3",
		"meta-llama/Llama-3.1-8B-Instruct": "llama3.1", "llama3.3:70b": "llama3.1",
		"deepseek-ai/DeepSeek-V3": "deepseek-v3",
	} {
		f, err := ForModel(name)
		require.NoError(t, err, name)
		assert.Equal(t, want, f.Name, name)
	}
	_, err := ForModel("gpt-4.1-mini")
	require.Error(t, err)
	assert.Equal(t, `no token-in bridge for the chat template of model "gpt-4.1-mini" (bridged: qwen3, llama3.1, deepseek-v3)`, err.Error())
}
