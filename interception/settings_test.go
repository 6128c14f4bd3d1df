package interception_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
)

// withModel is f's pool serving one more rollout, whose run asks for
// model, with the caller's own sampling.
func (f fixture) withModel(t *testing.T, model string) fixture {
	t.Helper()
	slot, err := f.pool.Acquire(context.Background(), interception.Rollout{Key: "run/1/0/" + model, Model: model})
	require.NoError(t, err)
	return fixture{pool: f.pool, slot: slot, recorded: f.recorded}
}

// sdkCall is one model call made with a caller dialect's official SDK.
type sdkCall func(f fixture) error

func chatCall(p openai.ChatCompletionNewParams) sdkCall {
	return func(f fixture) error {
		p.Model = "caller-model"
		p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+2?")}
		_, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), p)
		return err
	}
}

func responsesCall(p responses.ResponseNewParams) sdkCall {
	return func(f fixture) error {
		p.Model = "caller-model"
		p.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("What is 2+2?")}
		_, err := f.client(f.slot.Secret).Responses.New(context.Background(), p)
		return err
	}
}

func anthropicCall(p anthropic.MessageNewParams) sdkCall {
	return func(f fixture) error {
		p.Model = "caller-model"
		if p.MaxTokens == 0 {
			p.MaxTokens = 3000
		}
		p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 2+2?"))}
		c := f.anthropic(f.slot.Secret)
		_, err := c.Messages.New(context.Background(), p)
		return err
	}
}

// refusedMessage is the status and message of an SDK's error, of either
// SDK.
func refusedMessage(t *testing.T, err error) (int, string) {
	t.Helper()
	var body struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	status, raw := refusal(t, err)
	require.NoError(t, json.Unmarshal([]byte(raw), &body), raw)
	return status, body.Message + body.Error.Message
}

// settingsFixtures are interception pools in front of one recording mock,
// one pool for each upstream dialect, with a rollout for each model asked.
type settingsFixtures struct {
	t    *testing.T
	up   *recordingMock
	byUp map[string]fixture
}

func newSettingsFixtures(t *testing.T) *settingsFixtures {
	return &settingsFixtures{t: t, up: newRecordingMock(t), byUp: map[string]fixture{}}
}

// of is the rollout that calls an upstream of dialect upstream with model.
func (s *settingsFixtures) of(upstream, model string) fixture {
	f, ok := s.byUp[upstream]
	if !ok {
		// Many calls, whose turns nobody waits for: none is sent to
		// f.recorded, which would fill.
		f = dialectFixture(s.t, upstream, s.up.url, func(c *interception.Config) { c.OnTurn = nil })
		s.byUp[upstream] = f
	}
	return f.withModel(s.t, model)
}

// answerSchema is a JSON schema every dialect's structured output takes.
var answerSchema = map[string]any{
	"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}},
	"required": []string{"answer"}, "additionalProperties": false,
}

// settingCase is one setting of a caller, translated to an upstream of
// another dialect asking model.
type settingCase struct {
	name, upstream, model string
	call                  sdkCall
	// check sees what the upstream received, when it is mapped.
	check func(t *testing.T, seen map[string]any)
	// refused names the field a refusal must name, when it is refused.
	refused string
}

// TestTranslatedSettings: each setting of the translation table, sent with
// a caller's official SDK, either reaches the upstream in its words or is
// refused with a 400 in the caller's error shape naming the field, the
// upstream uncalled.
func TestTranslatedSettings(t *testing.T) {
	fx := newSettingsFixtures(t)
	for _, tt := range slices.Concat(mappedSettings, refusedSettings, effortSettings) {
		t.Run(tt.name, func(t *testing.T) {
			f := fx.of(tt.upstream, tt.model)
			err := tt.call(f)
			seen := fx.up.take()
			if tt.refused == "" {
				require.NoError(t, err)
				require.Len(t, seen, 1, "the upstream got the call")
				tt.check(t, seen[0])
				return
			}
			require.Error(t, err)
			status, msg := refusedMessage(t, err)
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Contains(t, msg, tt.refused+" cannot be sent", "the refusal names the field")
			assert.Empty(t, seen, "the upstream is not called")
			var oa *openai.Error
			if errors.As(err, &oa) {
				assert.Equal(t, "unsupported_parameter", oa.Code)
			}
		})
	}
}

const (
	budgetClaude   = "claude-sonnet-4-5" // a thinking budget, structured outputs
	adaptiveClaude = "claude-opus-4-6"   // adaptive thinking, structured outputs
	olderClaude    = "claude-opus-4-1"   // a thinking budget only
)

// field is the value at path in a decoded body.
func field(t *testing.T, body map[string]any, path ...string) any {
	t.Helper()
	var v any = body
	for _, p := range path {
		obj, ok := v.(map[string]any)
		require.True(t, ok, "%v at %s is not an object", v, p)
		v = obj[p]
	}
	return v
}

// jsonOf is v as generic JSON, as a decoded body holds it.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

var chatSchemaFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
	JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Strict: openai.Bool(true), Schema: answerSchema}}}

var mappedSettings = []settingCase{
	{name: "chat response_format to responses text.format", upstream: dialects.NameResponses, model: "gpt-5",
		call: chatCall(openai.ChatCompletionNewParams{ResponseFormat: chatSchemaFormat}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, jsonOf(t, map[string]any{"type": "json_schema", "name": "answer", "strict": true, "schema": answerSchema}),
				field(t, seen, "text", "format"))
		}},
	{name: "chat response_format to anthropic output_config.format", upstream: dialects.NameAnthropic, model: budgetClaude,
		call: chatCall(openai.ChatCompletionNewParams{ResponseFormat: chatSchemaFormat}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, jsonOf(t, map[string]any{"type": "json_schema", "schema": answerSchema}), field(t, seen, "output_config", "format"))
		}},
	{name: "responses text.format to chat response_format", upstream: dialects.NameChat, model: "gpt-5",
		call: responsesCall(responses.ResponseNewParams{Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "answer", Schema: answerSchema, Strict: openai.Bool(true)}}}}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, jsonOf(t, map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "strict": true, "schema": answerSchema}}),
				seen["response_format"])
		}},
	{name: "anthropic output_config.format to chat response_format", upstream: dialects.NameChat, model: "gpt-5",
		call: anthropicCall(anthropic.MessageNewParams{OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: answerSchema}}}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, jsonOf(t, answerSchema), field(t, seen, "response_format", "json_schema", "schema"))
			assert.Equal(t, true, field(t, seen, "response_format", "json_schema", "strict"), "Anthropic's format is strict")
		}},
	{name: "chat logprobs to responses include and top_logprobs", upstream: dialects.NameResponses, model: "gpt-5",
		call: chatCall(openai.ChatCompletionNewParams{Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2)}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Contains(t, seen["include"], "message.output_text.logprobs")
			assert.EqualValues(t, 2, seen["top_logprobs"])
		}},
	{name: "responses logprobs to chat logprobs", upstream: dialects.NameChat, model: "gpt-5",
		call: responsesCall(responses.ResponseNewParams{TopLogprobs: openai.Int(3),
			Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, true, seen["logprobs"])
			assert.EqualValues(t, 3, seen["top_logprobs"])
		}},
	{name: "chat user, metadata and service_tier to responses", upstream: dialects.NameResponses, model: "gpt-5",
		call: chatCall(openai.ChatCompletionNewParams{User: openai.String("u-1"), Metadata: shared.Metadata{"run": "r1"},
			ServiceTier: openai.ChatCompletionNewParamsServiceTierFlex}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, "u-1", seen["user"])
			assert.Equal(t, map[string]any{"run": "r1"}, seen["metadata"])
			assert.Equal(t, "flex", seen["service_tier"])
		}},
	{name: "responses user, metadata and service_tier to chat", upstream: dialects.NameChat, model: "gpt-5",
		call: responsesCall(responses.ResponseNewParams{User: openai.String("u-2"), Metadata: shared.Metadata{"run": "r2"},
			ServiceTier: responses.ResponseNewParamsServiceTierPriority}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, "u-2", seen["user"])
			assert.Equal(t, map[string]any{"run": "r2"}, seen["metadata"])
			assert.Equal(t, "priority", seen["service_tier"])
		}},
	{name: "chat user and service_tier default to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude,
		call: chatCall(openai.ChatCompletionNewParams{User: openai.String("u-1"), ServiceTier: openai.ChatCompletionNewParamsServiceTierDefault}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, map[string]any{"user_id": "u-1"}, seen["metadata"])
			assert.Equal(t, "standard_only", seen["service_tier"])
		}},
	{name: "anthropic metadata.user_id and service_tier to chat", upstream: dialects.NameChat, model: "gpt-5",
		call: anthropicCall(anthropic.MessageNewParams{Metadata: anthropic.MetadataParam{UserID: anthropic.String("u-3")},
			ServiceTier: anthropic.MessageNewParamsServiceTierStandardOnly}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, "u-3", seen["user"])
			assert.Equal(t, "default", seen["service_tier"])
		}},
	{name: "anthropic metadata.user_id to responses user", upstream: dialects.NameResponses, model: "gpt-5",
		call:  anthropicCall(anthropic.MessageNewParams{Metadata: anthropic.MetadataParam{UserID: anthropic.String("u-3")}}),
		check: func(t *testing.T, seen map[string]any) { assert.Equal(t, "u-3", seen["user"]) }},
}

var refusedSettings = []settingCase{
	{name: "chat n 2 to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "n",
		call: chatCall(openai.ChatCompletionNewParams{N: openai.Int(2)})},
	{name: "chat n 2 to responses", upstream: dialects.NameResponses, model: "gpt-5", refused: "n",
		call: chatCall(openai.ChatCompletionNewParams{N: openai.Int(2)})},
	{name: "chat logprobs to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "logprobs",
		call: chatCall(openai.ChatCompletionNewParams{Logprobs: openai.Bool(true)})},
	{name: "responses logprobs to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude, refused: `include "message.output_text.logprobs"`,
		call: responsesCall(responses.ResponseNewParams{Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}})},
	{name: "chat metadata to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "metadata",
		call: chatCall(openai.ChatCompletionNewParams{Metadata: shared.Metadata{"run": "r1"}})},
	{name: "chat service_tier flex to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "service_tier",
		call: chatCall(openai.ChatCompletionNewParams{ServiceTier: openai.ChatCompletionNewParamsServiceTierFlex})},
	{name: "chat response_format to a claude without structured outputs", upstream: dialects.NameAnthropic, model: olderClaude, refused: "response_format",
		call: chatCall(openai.ChatCompletionNewParams{ResponseFormat: chatSchemaFormat})},
	{name: "responses json_object to anthropic", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "text.format",
		call: responsesCall(responses.ResponseNewParams{Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}}})},
}

var effortSettings = []settingCase{
	{name: "chat high effort to adaptive claude keeps the cap", upstream: dialects.NameAnthropic, model: adaptiveClaude,
		call: chatCall(openai.ChatCompletionNewParams{ReasoningEffort: shared.ReasoningEffortHigh, MaxCompletionTokens: openai.Int(2000)}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, map[string]any{"type": "adaptive"}, seen["thinking"])
			assert.Equal(t, map[string]any{"effort": "high"}, seen["output_config"])
			assert.EqualValues(t, 2000, seen["max_tokens"])
		}},
	{name: "responses high effort fits a budget under the cap", upstream: dialects.NameAnthropic, model: budgetClaude,
		call: responsesCall(responses.ResponseNewParams{Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh}, MaxOutputTokens: openai.Int(2000)}),
		check: func(t *testing.T, seen map[string]any) {
			assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(1999)}, seen["thinking"])
			assert.EqualValues(t, 2000, seen["max_tokens"])
		}},
	{name: "anthropic effort without thinking to chat", upstream: dialects.NameChat, model: "gpt-5",
		call:  anthropicCall(anthropic.MessageNewParams{OutputConfig: anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffortHigh}}),
		check: func(t *testing.T, seen map[string]any) { assert.Equal(t, "high", seen["reasoning_effort"]) }},
	{name: "chat low effort under a cap too small for a budget", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "reasoning_effort",
		call: chatCall(openai.ChatCompletionNewParams{ReasoningEffort: shared.ReasoningEffortLow, MaxCompletionTokens: openai.Int(1000)})},
	{name: "chat max effort to responses", upstream: dialects.NameResponses, model: "gpt-5", refused: "reasoning_effort",
		call: chatCall(openai.ChatCompletionNewParams{ReasoningEffort: "max"})},
	{name: "responses max effort to a budget claude", upstream: dialects.NameAnthropic, model: budgetClaude, refused: "reasoning.effort",
		call: responsesCall(responses.ResponseNewParams{Reasoning: shared.ReasoningParam{Effort: "max"}})},
	{name: "anthropic max effort to chat", upstream: dialects.NameChat, model: "gpt-5", refused: "output_config.effort",
		call: anthropicCall(anthropic.MessageNewParams{Thinking: anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}},
			OutputConfig: anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffortMax}})},
}

// TestTranslatedMaxTokensNeverAboveTheCallers: whatever effort a caller
// asks for under whatever cap, the translated request's max tokens are at
// most the caller's, its thinking budget below them, or the call is
// refused before the upstream.
func TestTranslatedMaxTokensNeverAboveTheCallers(t *testing.T) {
	fx := newSettingsFixtures(t)
	type target struct{ upstream, model string }
	targets := map[string][]target{
		dialects.NameChat:      {{dialects.NameAnthropic, budgetClaude}, {dialects.NameAnthropic, adaptiveClaude}, {dialects.NameResponses, "gpt-5"}},
		dialects.NameResponses: {{dialects.NameAnthropic, budgetClaude}, {dialects.NameAnthropic, adaptiveClaude}, {dialects.NameChat, "gpt-5"}},
		dialects.NameAnthropic: {{dialects.NameChat, "gpt-5"}, {dialects.NameResponses, "gpt-5"}},
	}
	calls := map[string]func(effort string, maxTokens int64) sdkCall{
		dialects.NameChat: func(effort string, maxTokens int64) sdkCall {
			return chatCall(openai.ChatCompletionNewParams{ReasoningEffort: shared.ReasoningEffort(effort), MaxCompletionTokens: openai.Int(maxTokens)})
		},
		dialects.NameResponses: func(effort string, maxTokens int64) sdkCall {
			return responsesCall(responses.ResponseNewParams{Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffort(effort)}, MaxOutputTokens: openai.Int(maxTokens)})
		},
		dialects.NameAnthropic: func(effort string, maxTokens int64) sdkCall {
			return anthropicCall(anthropic.MessageNewParams{MaxTokens: maxTokens, OutputConfig: anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffort(effort)}})
		},
	}
	refused := 0
	for caller, tos := range targets {
		for _, to := range tos {
			for _, effort := range []string{"low", "medium", "high", "xhigh"} {
				for _, maxTokens := range []int64{1000, 3000, 20000} {
					err := calls[caller](effort, maxTokens)(fx.of(to.upstream, to.model))
					seen := fx.up.take()
					what := caller + " → " + to.upstream + " " + to.model + " " + effort
					if err != nil {
						status, msg := refusedMessage(t, err)
						assert.Equal(t, http.StatusBadRequest, status, what)
						assert.Contains(t, msg, "cannot be sent", what)
						assert.Empty(t, seen, what)
						refused++
						continue
					}
					require.Len(t, seen, 1, what)
					got := seen[0]["max_tokens"]
					if to.upstream == dialects.NameResponses {
						got = seen[0]["max_output_tokens"]
					}
					assert.LessOrEqual(t, got, float64(maxTokens), "%s: max tokens of %d", what, maxTokens)
					if thinking, ok := seen[0]["thinking"].(map[string]any); ok && thinking["type"] == "enabled" {
						assert.Less(t, thinking["budget_tokens"], float64(maxTokens), "%s: the thinking budget", what)
					}
				}
			}
		}
	}
	// Only a budget of at least 1024 under a cap of 1000, on the model
	// that takes a budget, has no room: one per caller and effort.
	assert.Equal(t, 2*4, refused)
}

// TestTranslatedChatStreamUsageOnlyWhenAsked: a chat caller whose call is
// translated gets usage in its stream only when it asked
// (stream_options.include_usage), and then as OpenAI sends it: a last
// chunk of its own with no choices, none on the finish chunk; whether the
// upstream streamed or answered whole.
func TestTranslatedChatStreamUsageOnlyWhenAsked(t *testing.T) {
	whole := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"4"}],`+
			`"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`)
	})
	for name, f := range map[string]fixture{
		"streamed": dialectFixture(t, dialects.NameResponses, newRecordingMock(t).url, nil),
		"whole":    dialectFixture(t, dialects.NameAnthropic, whole.URL+"/v1", nil),
	} {
		for _, asked := range []bool{false, true} {
			p := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2+2?")}}
			if asked {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			s := f.client(f.slot.Secret).Chat.Completions.NewStreaming(context.Background(), p)
			var chunks []openai.ChatCompletionChunk
			for s.Next() {
				chunks = append(chunks, s.Current())
			}
			require.NoError(t, s.Err())
			var withUsage []openai.ChatCompletionChunk
			finished := false
			for _, ch := range chunks {
				if ch.JSON.Usage.Valid() {
					withUsage = append(withUsage, ch)
				}
				for _, c := range ch.Choices {
					if c.FinishReason != "" {
						finished = true
						assert.False(t, ch.JSON.Usage.Valid(), "%s: no usage on the finish chunk", name)
					}
				}
			}
			assert.True(t, finished, name)
			if !asked {
				assert.Empty(t, withUsage, "%s: no usage unless asked", name)
				continue
			}
			require.Len(t, withUsage, 1, name)
			last := chunks[len(chunks)-1]
			assert.Empty(t, last.Choices, "%s: usage comes last, with no choices", name)
			assert.Positive(t, last.Usage.CompletionTokens, name)
			assert.Equal(t, last.Usage.PromptTokens+last.Usage.CompletionTokens, last.Usage.TotalTokens, name)
		}
	}
}

// TestClaudeModelsSayWhatAModelTakes: a model name the configuration reads
// as a Claude model (Config.ClaudeModels, the worker's --claude-model)
// gets what that model takes; another name not Claude's gets a budget.
func TestClaudeModelsSayWhatAModelTakes(t *testing.T) {
	up := newRecordingMock(t)
	f := dialectFixture(t, dialects.NameAnthropic, up.url, func(c *interception.Config) {
		c.OnTurn = nil
		c.ClaudeModels = map[string]string{"house-model": adaptiveClaude}
	})
	call := chatCall(openai.ChatCompletionNewParams{ReasoningEffort: shared.ReasoningEffortHigh, MaxCompletionTokens: openai.Int(2000)})
	require.NoError(t, call(f.withModel(t, "house-model")))
	require.NoError(t, call(f.withModel(t, "other-model")))
	seen := up.take()
	require.Len(t, seen, 2)
	assert.Equal(t, map[string]any{"type": "adaptive"}, seen[0]["thinking"], "read as Claude Opus 4.6")
	assert.Equal(t, map[string]any{"effort": "high"}, seen[0]["output_config"])
	assert.Equal(t, "house-model", seen[0]["model"], "the name sent is the run's")
	assert.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(1999)}, seen[1]["thinking"], "a name of no Claude model")
}

// A chat upstream's answer with the log probabilities of its two tokens,
// whole and streamed.
const (
	logprobsCompletion = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"4."},` +
		`"finish_reason":"stop","logprobs":{"content":[` + logprobFour + `,` + logprobDot + `],"refusal":null}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	logprobFour = `{"token":"4","logprob":-0.01,"bytes":[52],"top_logprobs":[{"token":"4","logprob":-0.01},{"token":"four","logprob":-4.7}]}`
	logprobDot  = `{"token":".","logprob":-0.2,"bytes":[46],"top_logprobs":[]}`
)

func logprobsChunk(delta, logprobs, finish string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta +
		`,"logprobs":` + logprobs + `,"finish_reason":` + finish + `}]}`
}

// TestTranslatedLogprobsReachTheCaller: a Responses caller that asked for
// log probabilities (include message.output_text.logprobs) gets a chat
// upstream's in its output text, whole and streamed; one that did not ask
// gets none, even from an upstream that sent them.
func TestTranslatedLogprobsReachTheCaller(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Stream bool }
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		if !body.Stream {
			writeJSON(w, http.StatusOK, logprobsCompletion)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvent(w, logprobsChunk(`{"role":"assistant","content":"4"}`, `{"content":[`+logprobFour+`]}`, "null"))
		writeEvent(w, logprobsChunk(`{"content":"."}`, `{"content":[`+logprobDot+`]}`, "null"))
		writeEvent(w, logprobsChunk(`{}`, "null", `"stop"`))
		writeEvent(w, `[DONE]`)
	})
	f := dialectFixture(t, dialects.NameChat, up.URL+"/v1", func(c *interception.Config) { c.OnTurn = nil })
	c := f.client(f.slot.Secret)
	for _, asked := range []bool{true, false} {
		p := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("2+2?")}}
		if asked {
			p.Include, p.TopLogprobs = []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}, openai.Int(2)
		}
		whole, err := c.Responses.New(context.Background(), p)
		require.NoError(t, err)
		s := c.Responses.NewStreaming(context.Background(), p)
		var deltas []responses.ResponseTextDeltaEventLogprob
		var streamed responses.Response
		for s.Next() {
			switch ev := s.Current(); ev.Type {
			case "response.output_text.delta":
				deltas = append(deltas, ev.AsResponseOutputTextDelta().Logprobs...)
			case "response.completed":
				streamed = ev.Response
			}
		}
		require.NoError(t, s.Err())
		for name, r := range map[string]*responses.Response{"whole": whole, "streamed": &streamed} {
			require.NotEmpty(t, r.Output, name)
			lp := r.Output[0].Content[0].Logprobs
			if !asked {
				assert.Empty(t, lp, "%s: not asked, none sent", name)
				continue
			}
			require.Len(t, lp, 2, name)
			assert.Equal(t, "4", lp[0].Token, name)
			assert.Equal(t, "four", lp[0].TopLogprobs[1].Token, name)
			assert.InDelta(t, -0.2, lp[1].Logprob, 1e-9, name)
		}
		if asked {
			require.Len(t, deltas, 2, "each delta carries its tokens'")
			assert.Equal(t, ".", deltas[1].Token)
		} else {
			assert.Empty(t, deltas)
		}
	}
}
