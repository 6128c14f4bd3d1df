package bench_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
)

// BenchmarkConversationTokenIn times a four-turn tool-calling conversation
// through the interception to the offline mock, recording token data,
// with the prompts sent as text (the baseline: the server tokenizes them
// again) and as token ids (--token-in: two /tokenize calls before each turn
// after the first, then /v1/chat/completions/tokens). The difference is
// what exact prefixes cost on loopback, before any model time.
func BenchmarkConversationTokenIn(b *testing.B) {
	_, url := mocktest.Serve(b, mock.Config{})
	pool := interception.NewPool(interception.Config{Upstream: providers.NewOpenAI(url, "upstream-key")})
	b.Cleanup(func() { _ = pool.Close() })
	for _, mode := range []string{"text", "token-in"} {
		b.Run(mode, func(b *testing.B) {
			n := 0
			for b.Loop() {
				key := "bench/" + mode + "/" + strconv.Itoa(n)
				n++
				ro := interception.Rollout{Key: key, Model: "mock", Tokens: &dialects.TokenRequest{}, TokenIn: mode == "token-in"}
				s, err := pool.Acquire(context.Background(), ro)
				require.NoError(b, err)
				converse4(b, s.Slot)
				turns, _ := s.Finish()
				s.Release()
				if mode == "token-in" {
					require.True(b, turns[len(turns)-1].TokenIn, "the last turn went in as tokens")
				}
			}
		})
	}
}

// converse4 makes four calculator turns through s: each answer and a tool
// result extend the conversation.
func converse4(b *testing.B, s interception.Slot) {
	ctx := context.Background()
	c := openai.NewClient(option.WithBaseURL(s.LocalURL+"/v1/"), option.WithAPIKey(s.Secret), option.WithMaxRetries(0))
	p := openai.ChatCompletionNewParams{Model: "mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 12 * 7?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "calculator", Parameters: openai.FunctionParameters{"type": "object",
				"properties": map[string]any{"expression": map[string]any{"type": "string"}}},
		})},
	}
	for turn := range 4 {
		r, err := c.Chat.Completions.New(ctx, p)
		require.NoError(b, err)
		msg := r.Choices[0].Message
		p.Messages = append(p.Messages, msg.ToParam())
		if len(msg.ToolCalls) > 0 {
			p.Messages = append(p.Messages, openai.ToolMessage("84", msg.ToolCalls[0].ID))
		} else {
			p.Messages = append(p.Messages, openai.UserMessage("And "+strconv.Itoa(turn+2)+" * 9?"))
		}
	}
}
