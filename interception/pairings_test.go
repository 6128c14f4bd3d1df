package interception_test

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/providers/mock/mocktest"
	"github.com/evalflow/evalflow/trace"
)

const (
	question = "What is 37 * (12 + 5)?"
	system   = "Use the calculator."
)

// dialectFixture is an interception pool in front of an upstream of the
// given dialect at url (with /v1), with one rollout acquired.
func dialectFixture(t *testing.T, upstreamDialect, url string, mutate func(*interception.Config)) fixture {
	t.Helper()
	up, err := providers.New(upstreamDialect, url, "upstream-key")
	require.NoError(t, err)
	return fixtureOf(t, up, dialects.Sampling{Temperature: ptr(0.25)}, mutate)
}

// mockUpstream starts the offline mock model and returns its /v1 URL.
func mockUpstream(t *testing.T) string {
	t.Helper()
	_, url := mocktest.Serve(t, mock.Config{})
	return url
}

func (f fixture) anthropic(secret string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(f.slot.LocalURL), aoption.WithAPIKey(secret), aoption.WithMaxRetries(0))
}

// turns waits for n recorded turns and returns the rollout's turns.
func (f fixture) turns(t *testing.T, n int) []trace.Turn {
	t.Helper()
	for range n {
		<-f.recorded
	}
	turns, ok := f.slot.Turns()
	require.True(t, ok)
	require.Len(t, turns, n)
	return turns
}

// conversation is one caller dialect's two-turn calculator conversation,
// made with its official SDK: it returns the tool call's arguments and the
// final answer.
type conversation func(t *testing.T, f fixture, stream bool) (args, answer string)

var conversations = map[string]conversation{
	dialects.NameChat:      chatConversation,
	dialects.NameResponses: responsesConversation,
	dialects.NameAnthropic: anthropicConversation,
}

var calculatorParams = map[string]any{
	"type":       "object",
	"properties": map[string]any{"expression": map[string]any{"type": "string"}},
	"required":   []string{"expression"},
}

func chatConversation(t *testing.T, f fixture, stream bool) (string, string) {
	c := f.client(f.slot.Secret)
	p := openai.ChatCompletionNewParams{
		Model:           "caller-model",
		Messages:        []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(question)},
		Tools:           []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "calculator", Parameters: calculatorParams})},
		ReasoningEffort: shared.ReasoningEffortLow,
	}
	call := func() openai.ChatCompletionMessage {
		if !stream {
			got, err := c.Chat.Completions.New(context.Background(), p)
			require.NoError(t, err)
			require.Len(t, got.Choices, 1)
			return got.Choices[0].Message
		}
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(context.Background(), p)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			require.True(t, acc.AddChunk(s.Current()), "chunk rejected: %s", s.Current().RawJSON())
		}
		require.NoError(t, s.Err())
		require.Len(t, acc.Choices, 1)
		return acc.Choices[0].Message
	}
	first := call()
	require.Len(t, first.ToolCalls, 1)
	tc := first.ToolCalls[0]
	assert.Equal(t, "calculator", tc.Function.Name)
	p.Messages = append(p.Messages, first.ToParam(), openai.ToolMessage("629", tc.ID))
	second := call()
	return tc.Function.Arguments, second.Content
}

func responsesConversation(t *testing.T, f fixture, stream bool) (string, string) {
	c := f.client(f.slot.Secret)
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(question, responses.EasyInputMessageRoleUser)}
	p := responses.ResponseNewParams{
		Model:        "caller-model",
		Instructions: openai.String(system),
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
			Name: "calculator", Parameters: calculatorParams, Strict: openai.Bool(false)}}},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow},
	}
	call := func() responses.Response {
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
		if !stream {
			got, err := c.Responses.New(context.Background(), p)
			require.NoError(t, err)
			return *got
		}
		s := c.Responses.NewStreaming(context.Background(), p)
		var final *responses.Response
		var created, argDeltas int
		for s.Next() {
			ev := s.Current()
			switch ev.Type {
			case "response.created":
				created++
			case "response.function_call_arguments.delta":
				argDeltas++
			case "response.completed":
				r := ev.Response
				final = &r
			}
		}
		require.NoError(t, s.Err())
		assert.Equal(t, 1, created, "response.created opens the stream")
		require.NotNil(t, final, "response.completed ends the stream")
		if len(final.Output) > 0 && hasFunctionCall(*final) {
			assert.Greater(t, argDeltas, 1, "tool-call arguments are streamed in pieces")
		}
		return *final
	}
	first := call()
	var args, callID string
	for _, item := range first.Output {
		switch item.Type {
		case "reasoning":
			input = append(input, carriedReasoning(item.AsReasoning()))
		case "function_call":
			fc := item.AsFunctionCall()
			assert.Equal(t, "calculator", fc.Name)
			args, callID = fc.Arguments, fc.CallID
			input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name))
		}
	}
	require.NotEmpty(t, callID, "a function call: %s", first.RawJSON())
	out := responses.ResponseInputItemParamOfFunctionCallOutput("629")
	out.OfFunctionCallOutput.CallID = openai.String(callID)
	input = append(input, out)
	second := call()
	return args, second.OutputText()
}

func hasFunctionCall(r responses.Response) bool {
	for _, item := range r.Output {
		if item.Type == "function_call" {
			return true
		}
	}
	return false
}

func anthropicConversation(t *testing.T, f fixture, stream bool) (string, string) {
	c := f.anthropic(f.slot.Secret)
	p := anthropic.MessageNewParams{
		Model:     "caller-model",
		MaxTokens: 2048,
		System:    []anthropic.TextBlockParam{{Text: system}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "calculator",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: calculatorParams["properties"], Required: []string{"expression"}}}}},
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
	}
	call := func() anthropic.Message {
		if !stream {
			got, err := c.Messages.New(context.Background(), p)
			require.NoError(t, err)
			return *got
		}
		s := c.Messages.NewStreaming(context.Background(), p)
		var acc anthropic.Message
		for s.Next() {
			require.NoError(t, acc.Accumulate(s.Current()))
		}
		require.NoError(t, s.Err())
		return acc
	}
	first := call()
	var args, id string
	for _, b := range first.Content {
		if b.Type == "tool_use" {
			assert.Equal(t, "calculator", b.Name)
			args, id = string(b.Input), b.ID
		}
	}
	require.NotEmpty(t, id, "a tool_use block: %s", first.RawJSON())
	p.Messages = append(p.Messages, first.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, "629", false)))
	second := call()
	var answer string
	for _, b := range second.Content {
		if b.Type == "text" {
			answer += b.Text
		}
	}
	return args, answer
}

// TestPairings runs every caller dialect's official SDK against an upstream
// of every dialect, streaming and not, and checks the answer and that the
// trace holds the same typed turns whatever the pairing.
func TestPairings(t *testing.T) {
	url := mockUpstream(t)
	for _, caller := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
		for _, up := range []string{dialects.NameChat, dialects.NameResponses, dialects.NameAnthropic} {
			for _, stream := range []bool{false, true} {
				name := caller + "→" + up + map[bool]string{false: "/json", true: "/sse"}[stream]
				t.Run(name, func(t *testing.T) {
					f := dialectFixture(t, up, url, nil)
					args, answer := conversations[caller](t, f, stream)
					assert.JSONEq(t, `{"expression":"37 * (12 + 5)"}`, args)
					assert.Equal(t, "The answer is 629.", answer)

					turns := f.turns(t, 2)
					first, second := turns[0], turns[1]
					for _, turn := range []trace.Turn{first, second} {
						assert.Equal(t, caller, turn.Dialect)
						assert.Equal(t, stream, turn.Streamed)
						assert.Equal(t, 200, turn.Status)
						assert.Empty(t, turn.Error)
						assert.Equal(t, runModel, turn.Request.Model)
						assert.Equal(t, ptr(0.25), turn.Request.Sampling.Temperature)
						assert.Equal(t, dialects.RoleSystem, turn.Request.Messages[0].Role)
						assert.Equal(t, system, turn.Request.Messages[0].Text())
						require.Len(t, turn.Request.Tools, 1)
						assert.Equal(t, "calculator", turn.Request.Tools[0].Name)
						assert.Equal(t, "mock", turn.Response.Model)
						assert.Equal(t, dialects.RoleAssistant, turn.Response.Message.Role)
						// openai-go's ToParam keeps no reasoning_details: the
						// echoed tool-calling turn has lost its thinking block, so
						// the Anthropic upstream is asked without thinking then.
						if caller != dialects.NameChat || up != dialects.NameAnthropic || turn.Request.Messages[len(turn.Request.Messages)-1].Role != dialects.RoleTool {
							assert.NotEmpty(t, turn.Response.Message.Reasoning, "reasoning crosses the protocols")
						}
						assert.Positive(t, turn.Response.Usage.InputTokens)
						assert.Positive(t, turn.Response.Usage.OutputTokens)
					}
					assert.Equal(t, dialects.FinishToolCalls, first.Response.FinishReason)
					require.Len(t, first.Response.Message.ToolCalls, 1)
					assert.Equal(t, "calculator", first.Response.Message.ToolCalls[0].Name)
					assert.JSONEq(t, `{"expression":"37 * (12 + 5)"}`, first.Response.Message.ToolCalls[0].Arguments)

					assert.Equal(t, dialects.FinishStop, second.Response.FinishReason)
					assert.Equal(t, "The answer is 629.", second.Response.Message.Text())
					msgs := second.Request.Messages
					require.Len(t, msgs, 4, "system, user, assistant tool call, tool result")
					assert.Equal(t, []string{"system", "user", "assistant", "tool"},
						[]string{msgs[0].Role, msgs[1].Role, msgs[2].Role, msgs[3].Role})
					assert.Equal(t, first.Response.Message.ToolCalls[0].ID, msgs[3].ToolCallID)
					assert.Equal(t, "629", msgs[3].Text())
				})
			}
		}
	}
}

// carriedReasoning is a response's reasoning item as the next request's
// input, encrypted content and all, as a client that keeps no state on
// the server carries it.
func carriedReasoning(r responses.ResponseReasoningItem) responses.ResponseInputItemUnionParam {
	var summary []responses.ResponseReasoningItemSummaryParam
	for _, s := range r.Summary {
		summary = append(summary, responses.ResponseReasoningItemSummaryParam{Text: s.Text})
	}
	in := responses.ResponseInputItemParamOfReasoning(r.ID, summary)
	if r.EncryptedContent != "" {
		in.OfReasoning.EncryptedContent = openai.String(r.EncryptedContent)
	}
	return in
}
