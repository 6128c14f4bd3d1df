package agent

import (
	"context"
	"errors"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// responsesSession speaks the OpenAI Responses API, statelessly: every call
// sends the whole conversation, reasoning items included.
type responsesSession struct {
	client openai.Client
	params responses.ResponseNewParams
	input  responses.ResponseInputParam
	stream bool
}

// responsesTools are the agent's tools as Responses functions.
func responsesTools() []responses.ToolUnionParam {
	var out []responses.ToolUnionParam
	for _, t := range toolSpecs {
		out = append(out, responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        t.name,
			Description: openai.String(t.description),
			Parameters:  t.parameters,
			Strict:      openai.Bool(false),
		}})
	}
	return out
}

func newResponsesSession(client openai.Client, model string, msgs []message, stream bool) *responsesSession {
	s := &responsesSession{client: client, stream: stream, params: responses.ResponseNewParams{
		Model: model,
		Tools: responsesTools(),
		Store: openai.Bool(false),
	}}
	for _, m := range msgs {
		role := responses.EasyInputMessageRoleUser
		switch m.role {
		case "system":
			role = responses.EasyInputMessageRoleSystem
		case "developer":
			role = responses.EasyInputMessageRoleDeveloper
		case "assistant":
			role = responses.EasyInputMessageRoleAssistant
		}
		s.input = append(s.input, responses.ResponseInputItemParamOfMessage(m.content, role))
	}
	return s
}

func (s *responsesSession) next(ctx context.Context) (reply, error) {
	resp, err := s.create(ctx)
	if err != nil {
		return reply{}, err
	}
	r := reply{answer: resp.OutputText()}
	var carried responses.ResponseInputParam
	for _, item := range resp.Output {
		switch item.Type {
		case "reasoning":
			ri := item.AsReasoning()
			var summary []responses.ResponseReasoningItemSummaryParam
			for _, sm := range ri.Summary {
				summary = append(summary, responses.ResponseReasoningItemSummaryParam{Text: sm.Text})
			}
			in := responses.ResponseInputItemParamOfReasoning(ri.ID, summary)
			if ri.EncryptedContent != "" {
				in.OfReasoning.EncryptedContent = openai.String(ri.EncryptedContent)
			}
			carried = append(carried, in)
		case "function_call":
			fc := item.AsFunctionCall()
			r.calls = append(r.calls, call{id: fc.CallID, name: fc.Name, arguments: fc.Arguments})
			carried = append(carried, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name))
		case "message":
			for _, c := range item.AsMessage().Content {
				if c.Type == "refusal" {
					r.refusal += c.Refusal
				}
			}
		}
	}
	if len(r.calls) > 0 {
		s.input = append(s.input, carried...)
	}
	return r, nil
}

func (s *responsesSession) results(calls []call, outputs []result) {
	for i, c := range calls {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(outputs[i].text)
		out.OfFunctionCallOutput.CallID = openai.String(c.id)
		s.input = append(s.input, out)
	}
}

func (s *responsesSession) create(ctx context.Context) (*responses.Response, error) {
	params := s.params
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: s.input}
	if !s.stream {
		return s.client.Responses.New(ctx, params)
	}
	st := s.client.Responses.NewStreaming(ctx, params)
	defer st.Close()
	var final *responses.Response
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.completed", "response.incomplete":
			r := ev.Response
			final = &r
		case "response.failed":
			return nil, errors.New("response failed: " + ev.Response.Error.Message)
		case "error":
			return nil, errors.New("stream error: " + ev.Message)
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	if final == nil {
		return nil, errors.New("stream ended without response.completed")
	}
	return final, nil
}
