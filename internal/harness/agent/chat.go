package agent

import (
	"context"
	"errors"

	"github.com/openai/openai-go/v3"
)

// chatSession speaks OpenAI chat completions.
type chatSession struct {
	client openai.Client
	params openai.ChatCompletionNewParams
	stream bool
}

func newChatSession(client openai.Client, model string, msgs []message, stream bool) *chatSession {
	s := &chatSession{client: client, stream: stream, params: openai.ChatCompletionNewParams{
		Model: model,
		Tools: chatTools(),
	}}
	for _, m := range msgs {
		switch m.role {
		case "system":
			s.params.Messages = append(s.params.Messages, openai.SystemMessage(m.content))
		case "developer":
			s.params.Messages = append(s.params.Messages, openai.DeveloperMessage(m.content))
		case "assistant":
			s.params.Messages = append(s.params.Messages, openai.AssistantMessage(m.content))
		default:
			s.params.Messages = append(s.params.Messages, openai.UserMessage(m.content))
		}
	}
	return s
}

func (s *chatSession) next(ctx context.Context) (reply, error) {
	msg, err := s.complete(ctx)
	if err != nil {
		return reply{}, err
	}
	r := reply{answer: msg.Content, refusal: msg.Refusal}
	for _, tc := range msg.ToolCalls {
		r.calls = append(r.calls, call{id: tc.ID, name: tc.Function.Name, arguments: tc.Function.Arguments})
	}
	if len(r.calls) > 0 {
		s.params.Messages = append(s.params.Messages, msg.ToParam())
	}
	return r, nil
}

func (s *chatSession) results(calls []call, outputs []result) {
	for i, c := range calls {
		s.params.Messages = append(s.params.Messages, openai.ToolMessage(outputs[i].text, c.id))
	}
}

// chatTools are the agent's tools as chat completions functions.
func chatTools() []openai.ChatCompletionToolUnionParam {
	var out []openai.ChatCompletionToolUnionParam
	for _, t := range toolSpecs {
		out = append(out, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        t.name,
			Description: openai.String(t.description),
			Parameters:  t.parameters,
		}))
	}
	return out
}

// complete makes one model call and returns the assistant message.
func (s *chatSession) complete(ctx context.Context) (openai.ChatCompletionMessage, error) {
	if !s.stream {
		resp, err := s.client.Chat.Completions.New(ctx, s.params)
		if err != nil {
			return openai.ChatCompletionMessage{}, err
		}
		if len(resp.Choices) == 0 {
			return openai.ChatCompletionMessage{}, errors.New("response has no choices")
		}
		return resp.Choices[0].Message, nil
	}
	params := s.params
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := s.client.Chat.Completions.NewStreaming(ctx, params)
	defer st.Close()
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			return openai.ChatCompletionMessage{}, errors.New("malformed stream chunk")
		}
	}
	if err := st.Err(); err != nil {
		return openai.ChatCompletionMessage{}, err
	}
	if len(acc.Choices) == 0 {
		return openai.ChatCompletionMessage{}, errors.New("stream has no choices")
	}
	return acc.Choices[0].Message, nil
}
