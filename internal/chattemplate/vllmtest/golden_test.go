package vllmtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/internal/chattemplate"
	"github.com/evalflow/evalflow/internal/chattemplate/vllmtest"
)

// The goldens are transformers' renders of testdata/conversations.json
// (internal/chattemplate/testdata/render.py): the upstream's renders and
// tokenizations are held to them token for token.

type conversation struct {
	Name     string           `json:"name"`
	Tools    bool             `json:"tools"`
	Messages []map[string]any `json:"messages"`
}

// spec is conversations.json. Its tools and arguments stay JSON text:
// a map would reorder their keys, which the templates render in order.
type spec struct {
	Tools         []json.RawMessage `json:"tools"`
	Conversations []conversation    `json:"conversations"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), path)
}

func readSpec(t *testing.T) (spec, map[string]conversation) {
	t.Helper()
	var s spec
	readJSON(t, filepath.Join("..", "testdata", "conversations.json"), &s)
	byName := map[string]conversation{}
	for _, c := range s.Conversations {
		byName[c.Name] = c
	}
	return s, byName
}

func readGolden(t *testing.T, f chattemplate.Family) (chattemplate.Golden, []chattemplate.Render) {
	t.Helper()
	g, err := chattemplate.ReadGolden(filepath.Join("..", "testdata", "goldens"), f)
	require.NoError(t, err)
	return g, g.Failed
}

// messages are r's messages as render.py gives them to the template: the
// arguments as their JSON text or parsed, a null content or "".
func (s spec) messages(c conversation, args, content string, k int) []map[string]any {
	var out []map[string]any
	for _, m := range c.Messages[:k] {
		v := map[string]any{}
		for key, x := range m {
			v[key] = x
		}
		if content == "empty" && v["content"] == nil {
			v["content"] = ""
		}
		if calls, ok := v["tool_calls"].([]any); ok && args == "object" {
			var parsed []any
			for _, tc := range calls {
				fn := tc.(map[string]any)["function"].(map[string]any)
				parsed = append(parsed, map[string]any{"id": tc.(map[string]any)["id"], "type": "function",
					"function": map[string]any{"name": fn["name"], "arguments": json.RawMessage(fn["arguments"].(string))}})
			}
			v["tool_calls"] = parsed
		}
		out = append(out, v)
	}
	return out
}

func (s spec) request(convs map[string]conversation, r chattemplate.Render) vllmtest.TokenizeRequest {
	c := convs[r.Conversation]
	req := vllmtest.TokenizeRequest{Messages: s.messages(c, r.Args, r.Content, r.K), AddGenerationPrompt: r.Gen, ChatTemplateKwargs: r.Kwargs}
	if c.Tools {
		req.Tools = s.Tools
	}
	return req
}

// Rendering each conversation as given, as transformers'
// apply_chat_template takes it, the upstream's /tokenize answers
// transformers' ids for every render of the goldens, and their decoding
// is transformers' text (a byte-level tokenizer decodes back what it
// encoded, so the render's text is transformers' too); every render
// transformers failed fails.
func TestTokenizeReproducesTransformersRenders(t *testing.T) {
	s, convs := readSpec(t)
	for _, f := range chattemplate.Families {
		t.Run(f.Name, func(t *testing.T) {
			g, failed := readGolden(t, f)
			srv := vllmtest.Start(t, vllmtest.Config{Family: f, AsGiven: true})
			for _, r := range g.Renders {
				ids, err := srv.Tokenize(s.request(convs, r))
				require.NoError(t, err, "%s", r)
				assert.Equal(t, r.IDs, ids, "%s", r)
				text, err := srv.Detokenize(ids)
				require.NoError(t, err)
				assert.Equal(t, r.Text, text, "%s", r)
			}
			for _, r := range failed {
				_, err := srv.Tokenize(s.request(convs, r))
				assert.ErrorContains(t, err, "the chat template failed", "%s: transformers fails it", r)
			}
			t.Logf("figure: %s: %d renders and %d failures as transformers'", f.Name, len(g.Renders), len(failed))
		})
	}
}

// vLLM hands a template a null content as "" and tool call arguments
// parsed from their JSON text: whatever variant a request sends, the
// upstream renders transformers' render of the conversation with the
// arguments as an object and no null content, also where transformers
// fails the variant as sent (Qwen3's template fails on a null content).
func TestTokenizeRendersWhatVLLMHandsTheTemplate(t *testing.T) {
	s, convs := readSpec(t)
	for _, f := range chattemplate.Families {
		t.Run(f.Name, func(t *testing.T) {
			g, failed := readGolden(t, f)
			byKey := map[string]chattemplate.Render{}
			for _, r := range g.Renders {
				byKey[r.String()] = r
			}
			srv := vllmtest.Start(t, vllmtest.Config{Family: f})
			compared := 0
			for _, r := range append(g.Renders, failed...) {
				want := r
				want.Args, want.Content = "object", "empty"
				w, ok := byKey[want.String()]
				require.True(t, ok, "transformers renders %s", want)
				ids, err := srv.Tokenize(s.request(convs, r))
				require.NoError(t, err, "%s", r)
				assert.Equal(t, w.IDs, ids, "%s is rendered as %s", r, want)
				compared++
			}
			t.Logf("figure: %s: %d requests rendered as vLLM hands them over", f.Name, compared)
		})
	}
}

// A prompt is tokenized as transformers tokenizes a text: without special
// tokens when asked, with them by default (vLLM's default for a prompt),
// each token as the vocabulary writes it, decoded back to the text.
func TestTokenizeStrings(t *testing.T) {
	for _, f := range chattemplate.Families {
		t.Run(f.Name, func(t *testing.T) {
			g, _ := readGolden(t, f)
			srv := vllmtest.Start(t, vllmtest.Config{Family: f})
			require.NotEmpty(t, g.Strings)
			for _, str := range g.Strings {
				body, err := json.Marshal(map[string]any{"prompt": str.Text, "add_special_tokens": false, "return_token_strs": true})
				require.NoError(t, err)
				resp, err := http.Post(srv.URL+"/tokenize", "application/json", bytes.NewReader(body))
				require.NoError(t, err)
				var got struct {
					Count     int      `json:"count"`
					Tokens    []int32  `json:"tokens"`
					TokenStrs []string `json:"token_strs"`
				}
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
				require.NoError(t, resp.Body.Close())
				assert.Equal(t, str.IDs, got.Tokens, "%q", str.Text)
				assert.Equal(t, str.Tokens, got.TokenStrs, "%q", str.Text)
				assert.Equal(t, len(str.IDs), got.Count)

				text := str.Text
				ids, err := srv.Tokenize(vllmtest.TokenizeRequest{Prompt: &text})
				require.NoError(t, err)
				assert.Equal(t, str.WithSpecial, ids, "%q with special tokens", str.Text)
				decoded, err := srv.Detokenize(str.IDs)
				require.NoError(t, err)
				assert.Equal(t, str.Decoded, decoded)
			}
		})
	}
}

// script answers each conversation's first user message with its
// assistant messages, turn after turn: their content, reasoning (where
// the family reasons) and tool calls, the arguments as their text.
func (s spec) script(f chattemplate.Family) []vllmtest.Entry {
	var entries []vllmtest.Entry
	for _, c := range s.Conversations {
		e := vllmtest.Entry{}
		for _, m := range c.Messages {
			switch m["role"] {
			case "user":
				if e.Match == "" {
					e.Match = m["content"].(string)
				}
			case "assistant":
				turn := vllmtest.Turn{}
				turn.Content, _ = m["content"].(string)
				if r, ok := m["reasoning_content"].(string); ok && f.Name == chattemplate.Qwen3.Name {
					turn.Reasoning = r
				}
				calls, _ := m["tool_calls"].([]any)
				for _, tc := range calls {
					fn := tc.(map[string]any)["function"].(map[string]any)
					args, _ := json.Marshal(fn["arguments"]) // the arguments' text, as a JSON string
					turn.ToolCalls = append(turn.ToolCalls, vllmtest.ToolCall{Name: fn["name"].(string), Arguments: args})
				}
				e.Turns = append(e.Turns, turn)
			}
		}
		entries = append(entries, e)
	}
	return entries
}

// The completion of a scripted turn is the turn as the template renders
// it last, up to its end token: the ids transformers gives the
// conversation with that turn, after those of its prompt, wherever the
// template renders an answer as the model writes it (every Qwen3 turn;
// Llama 3.1's and DeepSeek V3's turns without tool calls, which their
// templates drop: TestToolCallsAsEachFamilyWritesThem holds those). The
// prompt is vLLM's render of the messages as a client sends them (a null
// content, the arguments as text); the message answered is the turn's.
func TestCompletionIsTheTurnAsTheTemplateRendersItLast(t *testing.T) {
	s, convs := readSpec(t)
	for _, f := range chattemplate.Families {
		t.Run(f.Name, func(t *testing.T) {
			g, _ := readGolden(t, f)
			byKey := map[string]chattemplate.Render{}
			for _, r := range g.Renders {
				byKey[r.String()] = r
			}
			srv := vllmtest.Start(t, vllmtest.Config{Family: f, Script: s.script(f)})
			compared := 0
			for _, prompt := range g.Renders {
				msgs := convs[prompt.Conversation].Messages
				head, ok := byKey[variant(prompt.Conversation, "object", "empty", prompt.Kwargs, prompt.K+1, false).String()]
				if prompt.Args != "object" || prompt.Content != "empty" || !prompt.Gen || !ok ||
					!slices.Equal(prompt.IDs, head.IDs[:min(len(prompt.IDs), len(head.IDs))]) ||
					f.Name != chattemplate.Qwen3.Name && msgs[prompt.K]["tool_calls"] != nil {
					continue
				}
				sent := variant(prompt.Conversation, "string", "null", prompt.Kwargs, prompt.K, true)
				body := map[string]any{"messages": s.messages(convs[sent.Conversation], sent.Args, sent.Content, sent.K),
					"return_token_ids": true, "chat_template_kwargs": sent.Kwargs}
				if convs[sent.Conversation].Tools {
					body["tools"] = s.Tools
				}
				a := chat(t, srv, "/v1/chat/completions", body)
				assert.Equal(t, prompt.IDs, a.PromptTokenIDs, "%s", prompt)
				assert.Equal(t, head.IDs[len(prompt.IDs):len(head.IDs)-len(f.After)], a.Choices[0].TokenIDs, "%s", prompt)
				want := msgs[prompt.K]
				got := a.Choices[0].Message
				wantContent, _ := want["content"].(string)
				assert.Equal(t, wantContent, str(got.Content), "%s", prompt)
				if f.Name == chattemplate.Qwen3.Name {
					wantReasoning, _ := want["reasoning_content"].(string)
					assert.Equal(t, wantReasoning, str(got.ReasoningContent), "%s", prompt)
				}
				calls, _ := want["tool_calls"].([]any)
				require.Len(t, got.ToolCalls, len(calls), "%s", prompt)
				for i, tc := range calls {
					fn := tc.(map[string]any)["function"].(map[string]any)
					assert.Equal(t, fn["name"], got.ToolCalls[i].Function.Name)
					assert.JSONEq(t, fn["arguments"].(string), got.ToolCalls[i].Function.Arguments)
				}
				compared++
			}
			t.Logf("figure: %s: %d completions as the template renders the turn last", f.Name, compared)
			assert.Positive(t, compared)
		})
	}
}

// variant names a render of conversation conv's first k messages.
func variant(conv, args, content string, kwargs map[string]any, k int, gen bool) chattemplate.Render {
	return chattemplate.Render{Conversation: conv, Args: args, Content: content, Kwargs: kwargs, K: k, Gen: gen}
}
