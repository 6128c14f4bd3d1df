package agent

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go"
)

// anthropicMaxTokens is the max_tokens the agent asks for; the run's own
// limit, when it sets one, replaces it at the interception server.
const anthropicMaxTokens = 4096

// anthropicSession speaks Anthropic Messages.
type anthropicSession struct {
	client anthropic.Client
	params anthropic.MessageNewParams
	stream bool
}

// anthropicTools are the agent's tools as Anthropic tools.
func anthropicTools() []anthropic.ToolUnionParam {
	var out []anthropic.ToolUnionParam
	for _, t := range toolSpecs {
		out = append(out, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.name,
			Description: anthropic.String(t.description),
			InputSchema: anthropic.ToolInputSchemaParam{
				Properties: t.parameters["properties"],
				Required:   t.parameters["required"].([]string),
			},
		}})
	}
	return out
}

func newAnthropicSession(client anthropic.Client, model string, msgs []message, stream bool) *anthropicSession {
	s := &anthropicSession{client: client, stream: stream, params: anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: anthropicMaxTokens,
		Tools:     anthropicTools(),
	}}
	for _, m := range msgs {
		switch m.role {
		case "system", "developer":
			s.params.System = append(s.params.System, anthropic.TextBlockParam{Text: m.content})
		case "assistant":
			s.params.Messages = append(s.params.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock(m.content)))
		default:
			s.params.Messages = append(s.params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(m.content)))
		}
	}
	return s
}

func (s *anthropicSession) next(ctx context.Context) (reply, error) {
	msg, err := s.create(ctx)
	if err != nil {
		return reply{}, err
	}
	var r reply
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			r.answer += b.Text
		case "tool_use":
			r.calls = append(r.calls, call{id: b.ID, name: b.Name, arguments: string(b.Input)})
		}
	}
	if msg.StopReason == anthropic.StopReasonRefusal {
		r.refusal, r.answer = r.answer, ""
	}
	if len(r.calls) > 0 {
		s.params.Messages = append(s.params.Messages, msg.ToParam())
	}
	return r, nil
}

func (s *anthropicSession) results(calls []call, outputs []result) {
	var blocks []anthropic.ContentBlockParamUnion
	for i, c := range calls {
		blocks = append(blocks, anthropic.NewToolResultBlock(c.id, outputs[i].text, outputs[i].isError))
	}
	s.params.Messages = append(s.params.Messages, anthropic.NewUserMessage(blocks...))
}

func (s *anthropicSession) create(ctx context.Context) (*anthropic.Message, error) {
	if !s.stream {
		return s.client.Messages.New(ctx, s.params)
	}
	st := s.client.Messages.NewStreaming(ctx, s.params)
	defer st.Close()
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			return nil, err
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return &acc, nil
}
