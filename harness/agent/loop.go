package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
)

// agent runs one conversation against the model.
type agent struct {
	client openai.Client
	model  string
	stream bool
	out    io.Writer
}

// run loops model calls and tool executions until the model answers without
// calling a tool, and returns that answer. maxTurns 0 means no bound.
func (a *agent) run(ctx context.Context, msgs []openai.ChatCompletionMessageParamUnion, maxTurns int) (string, error) {
	params := openai.ChatCompletionNewParams{
		Model:    a.model,
		Messages: msgs,
		Tools:    []openai.ChatCompletionToolUnionParam{calculatorTool},
	}
	for turn := 1; maxTurns == 0 || turn <= maxTurns; turn++ {
		msg, err := a.complete(ctx, params)
		if err != nil {
			return "", fmt.Errorf("turn %d: %w", turn, err)
		}
		if len(msg.ToolCalls) == 0 {
			if msg.Refusal != "" && msg.Content == "" {
				fmt.Fprintf(a.out, "turn %d: refusal\n", turn)
			} else {
				fmt.Fprintf(a.out, "turn %d: answer (%d chars)\n", turn, len(msg.Content))
			}
			return msg.Content, nil
		}
		params.Messages = append(params.Messages, msg.ToParam())
		var calls []string
		for _, tc := range msg.ToolCalls {
			result := runTool(tc.Function.Name, tc.Function.Arguments)
			params.Messages = append(params.Messages, openai.ToolMessage(result, tc.ID))
			calls = append(calls, fmt.Sprintf("%s -> %s", tc.Function.Name, clip(result)))
		}
		fmt.Fprintf(a.out, "turn %d: %s\n", turn, strings.Join(calls, "; "))
	}
	return "", errTurnLimit
}

// complete makes one model call and returns the assistant message.
func (a *agent) complete(ctx context.Context, params openai.ChatCompletionNewParams) (openai.ChatCompletionMessage, error) {
	if !a.stream {
		resp, err := a.client.Chat.Completions.New(ctx, params)
		if err != nil {
			return openai.ChatCompletionMessage{}, err
		}
		if len(resp.Choices) == 0 {
			return openai.ChatCompletionMessage{}, errors.New("response has no choices")
		}
		return resp.Choices[0].Message, nil
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := a.client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			return openai.ChatCompletionMessage{}, errors.New("malformed stream chunk")
		}
	}
	if err := s.Err(); err != nil {
		return openai.ChatCompletionMessage{}, err
	}
	if len(acc.Choices) == 0 {
		return openai.ChatCompletionMessage{}, errors.New("stream has no choices")
	}
	return acc.Choices[0].Message, nil
}

// clip keeps a tool result short on the progress line.
func clip(s string) string {
	const limit = 40
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
