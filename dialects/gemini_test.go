package dialects_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// geminiWant is the golden Gemini request's conversation.
var geminiWant = []string{
	"system|You are a careful coding agent.",
	"user|Look at this and add 2+3.|img:data:image/png;base64,iVBORw0KGgo=",
	`assistant||call:call_gemini_1_1:add:{"a":2,"b":3}|call:call_gemini_1_2:describe:{}`,
	"tool|5|result:call_gemini_1_1",
	"tool|a red square|result:call_gemini_1_2",
	"assistant|2+3 is 5, and the image is a red square.",
	"user|Thanks, continue.",
}

// TestGeminiGoldenRequest: the capture's conversation, thoughts and
// signatures, tools and settings are read, and written back to Gemini
// unchanged.
func TestGeminiGoldenRequest(t *testing.T) {
	body := golden(t, "gemini_request.json")
	req, err := dialects.Gemini.ParseRequest(body)
	require.NoError(t, err)
	assert.Equal(t, geminiWant, summary(req.Messages))
	assert.Equal(t, []dialects.Thinking{
		{Text: "The user wants a sum; call add."},
		{ThoughtSignature: "CiQBVKhc7sig1AddCall==", ThoughtOn: "call:call_gemini_1_1"},
	}, req.Messages[2].Thinking)
	assert.Equal(t, []dialects.Thinking{{ThoughtSignature: "CiQBVKhc7sig2Text==", ThoughtOn: "text:0"}}, req.Messages[5].Thinking)
	require.Len(t, req.Tools, 2)
	assert.JSONEq(t, `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`, string(req.Tools[0].Parameters))
	assert.Equal(t, &dialects.ReasoningConfig{BudgetTokens: 4096, Summary: "auto"}, req.Reasoning)
	assert.Equal(t, 0.7, *req.Sampling.Temperature)
	assert.Equal(t, 8192, *req.Sampling.MaxTokens)
	assert.Equal(t, int64(42), *req.Sampling.Seed)
	assert.Equal(t, []string{"\nEND"}, req.Stop)
	assert.Equal(t, &dialects.ToolChoice{Mode: dialects.ToolChoiceAuto}, req.ToolChoice)

	out, err := dialects.Gemini.EncodeRequest(req)
	require.NoError(t, err)
	var got, want map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(out, &got))
	require.NoError(t, json.Unmarshal(body, &want))
	for _, k := range []string{"systemInstruction", "contents", "toolConfig", "generationConfig"} {
		assert.JSONEq(t, string(want[k]), string(got[k]), "EncodeRequest(ParseRequest(golden)).%s", k)
	}
	back, err := dialects.Gemini.ParseRequest(out)
	require.NoError(t, err)
	assert.Equal(t, summary(req.Messages), summary(back.Messages), "Gemini → typed → Gemini → typed")
	assert.Equal(t, req.Messages[2].Thinking, back.Messages[2].Thinking)
	assert.Equal(t, req.Messages[5].Thinking, back.Messages[5].Thinking)
}

// TestGeminiAcrossDialects: the golden Gemini request encoded for every
// other dialect and read back keeps its conversation, tools and cap; and
// each other dialect's golden request survives Gemini.
func TestGeminiAcrossDialects(t *testing.T) {
	req, err := dialects.Gemini.ParseRequest(golden(t, "gemini_request.json"))
	require.NoError(t, err)
	for _, to := range dialects.All {
		req := req
		if to == dialects.Responses {
			req.Stop = nil // refused: TestGeminiRefusals
		}
		out, err := to.EncodeRequest(req)
		require.NoError(t, err, "gemini → %s", to.Name())
		require.NoError(t, sdkRequest(to, out), "gemini → %s: %s", to.Name(), out)
		back, err := to.ParseRequest(out)
		require.NoError(t, err)
		assert.Equal(t, geminiWant, summary(back.Messages), "gemini → %s", to.Name())
		assert.Len(t, back.Tools, 2)
		assert.Equal(t, 8192, *back.Sampling.MaxTokens, "gemini → %s", to.Name())
		again, err := dialects.Gemini.EncodeRequest(back)
		require.NoError(t, err)
		if to != dialects.Chat {
			continue // only a chat upstream's reasoning_details take Gemini's state
		}
		assert.Contains(t, string(again), `{"thoughtSignature":"CiQBVKhc7sig1AddCall==","functionCall":{"name":"add"`,
			"gemini → %s → gemini keeps the call's thought signature", to.Name())
		assert.Contains(t, string(again), `{"text":"2+3 is 5, and the image is a red square.","thoughtSignature":"CiQBVKhc7sig2Text=="}`,
			"gemini → %s → gemini keeps the text's thought signature", to.Name())
	}
	for _, from := range dialects.All {
		req, err := from.ParseRequest(golden(t, from.Name()+"_request.json"))
		require.NoError(t, err)
		if from == dialects.Chat {
			req.Reasoning.Effort = "low"
		}
		out, err := dialects.Gemini.EncodeRequest(req)
		require.NoError(t, err, "%s → gemini", from.Name())
		back, err := dialects.Gemini.ParseRequest(out)
		require.NoError(t, err)
		assert.Equal(t, len(req.Tools), len(back.Tools))
		assert.Equal(t, toolCalls(req.Messages), toolCalls(back.Messages), "%s → gemini", from.Name())
	}
}

// toolCalls is every tool call's name and arguments in msgs.
func toolCalls(msgs []dialects.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			v := any(map[string]any{})
			_ = json.Unmarshal([]byte(tc.Arguments), &v)
			b, _ := json.Marshal(v)
			out = append(out, tc.Name+string(b))
		}
	}
	return out
}

// TestGeminiGoldenResponse: the capture's thought, text, call, signature,
// finish reason and usage are read, and survive every dialect's caller.
func TestGeminiGoldenResponse(t *testing.T) {
	body := golden(t, "gemini_response.json")
	resp, err := dialects.Gemini.ParseResponse(body)
	require.NoError(t, err)
	assert.Equal(t, "mOhVaJ2XLJ-XkdUPsMGx8Qo", resp.ID)
	assert.Equal(t, "gemini-2.5-pro", resp.Model)
	assert.Equal(t, dialects.FinishToolCalls, resp.FinishReason)
	assert.Equal(t, dialects.Usage{InputTokens: 1200, OutputTokens: 205, ReasoningTokens: 180, CacheReadTokens: 1024}, resp.Usage)
	assert.Equal(t, "Let me look at the workspace.", resp.Message.Text())
	assert.Equal(t, "I need the file list before editing.", resp.Message.Reasoning)
	require.Len(t, resp.Message.ToolCalls, 1)
	assert.JSONEq(t, `{"command":"ls -la"}`, resp.Message.ToolCalls[0].Arguments)

	out, err := dialects.Gemini.EncodeResponse(resp)
	require.NoError(t, err)
	assert.JSONEq(t, string(body), string(out), "Gemini → typed → Gemini")

	// A caller of another dialect echoes the answer as its next turn; the
	// signature reaches Gemini again on its call.
	for _, caller := range dialects.All {
		echoed := echoTurn(t, caller, resp)
		again, err := dialects.Gemini.EncodeRequest(dialects.Request{Messages: []dialects.Message{
			{Role: dialects.RoleUser, Content: []dialects.Part{{Type: dialects.PartText, Text: "go"}}}, echoed}})
		require.NoError(t, err)
		assert.Contains(t, string(again), `{"thoughtSignature":"CiQBVKhc7sigShellCall==","functionCall":{"name":"shell","args":{"command":"ls -la"}}}`,
			"gemini → %s caller → gemini", caller.Name())
	}
}

// echoTurn is resp as caller's SDK would send it back: the answer
// encoded for caller, read as the assistant turn of its next request.
func echoTurn(t *testing.T, caller dialects.Dialect, resp dialects.Response) dialects.Message {
	t.Helper()
	out, err := caller.EncodeResponse(resp)
	require.NoError(t, err)
	back, err := caller.ParseResponse(out)
	require.NoError(t, err)
	body, err := caller.EncodeRequest(dialects.Request{Model: "m", Messages: []dialects.Message{
		{Role: dialects.RoleUser, Content: []dialects.Part{{Type: dialects.PartText, Text: "go"}}}, back.Message}})
	require.NoError(t, err)
	req, err := caller.ParseRequest(body)
	require.NoError(t, err)
	require.Len(t, req.Messages, 2, "%s: %s", caller.Name(), body)
	return req.Messages[1]
}

// TestGeminiGoldenStream: the capture's chunks assemble into the golden
// response, with events as they arrive; written back as Gemini chunks
// and read again, the answer is the same.
func TestGeminiGoldenStream(t *testing.T) {
	s := dialects.Gemini.NewStream()
	var types []dialects.EventType
	for _, data := range sseData(t, golden(t, "gemini_stream.sse")) {
		require.NoError(t, s.Add(data))
		for _, ev := range s.Events() {
			types = append(types, ev.Type)
		}
	}
	require.True(t, s.Done())
	want, err := dialects.Gemini.ParseResponse(golden(t, "gemini_response.json"))
	require.NoError(t, err)
	assert.Equal(t, want, s.Response())
	assert.Equal(t, []dialects.EventType{dialects.EventStart, dialects.EventThinking, dialects.EventThinking,
		dialects.EventThinkingDone, dialects.EventText, dialects.EventText, dialects.EventToolCall,
		dialects.EventToolArgs, dialects.EventThinkingDone}, types)

	var buf bytes.Buffer
	require.NoError(t, dialects.Gemini.WriteStream(&buf, want))
	again := dialects.Gemini.NewStream()
	for _, data := range sseData(t, buf.Bytes()) {
		require.NoError(t, again.Add(data))
	}
	require.True(t, again.Done())
	got := again.Response()
	assert.Equal(t, summary([]dialects.Message{want.Message}), summary([]dialects.Message{got.Message}), "WriteStream → NewStream")
	assert.Equal(t, want.Message.Thinking, got.Message.Thinking)
	assert.Equal(t, want.Usage, got.Usage)
	assert.Equal(t, want.FinishReason, got.FinishReason)
}

// TestGeminiStreamTranslatesToEveryCaller: the Gemini stream's events,
// written for every dialect's caller, read back as the same answer.
func TestGeminiStreamTranslatesToEveryCaller(t *testing.T) {
	for _, caller := range dialects.All {
		s := dialects.Gemini.NewStream()
		var buf bytes.Buffer
		w := dialects.StreamWriterFor(caller, &buf, dialects.Request{})
		for _, data := range sseData(t, golden(t, "gemini_stream.sse")) {
			require.NoError(t, s.Add(data))
			for _, ev := range s.Events() {
				require.NoError(t, w.Emit(ev))
			}
		}
		require.NoError(t, w.Emit(dialects.Event{Type: dialects.EventFinish, Response: s.Response()}))
		got := caller.NewStream()
		for _, data := range sseData(t, buf.Bytes()) {
			require.NoError(t, got.Add(data), "%s: %s", caller.Name(), data)
		}
		r := got.Response()
		assert.Equal(t, "Let me look at the workspace.", r.Message.Text(), caller.Name())
		assert.Equal(t, toolCalls([]dialects.Message{s.Response().Message}), toolCalls([]dialects.Message{r.Message}), caller.Name())
	}
}

// TestGeminiErrors: Google's error shape is read and written, its
// statuses mapped to HTTP statuses and back.
func TestGeminiErrors(t *testing.T) {
	err := dialects.Gemini.ParseError(429, []byte(`{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`))
	var ge *dialects.GeminiError
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, "RESOURCE_EXHAUSTED", ge.Reason)
	code, msg := dialects.ErrorCode(err)
	assert.Equal(t, "RESOURCE_EXHAUSTED", code)
	assert.Equal(t, "Quota exceeded", msg)

	err = dialects.Gemini.ParseError(503, []byte(`[{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]`))
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, "UNAVAILABLE", ge.Reason)

	err = dialects.Gemini.ParseError(502, []byte(`<html>bad gateway</html>`))
	require.ErrorAs(t, err, &ge)
	assert.Equal(t, "<html>bad gateway</html>", ge.Message)

	for status, reason := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"} {
		rec := httptest.NewRecorder()
		dialects.Gemini.WriteError(rec, status, "", "boom")
		assert.JSONEq(t, `{"error":{"code":`+itoa(status)+`,"message":"boom","status":"`+reason+`"}}`, rec.Body.String())
		assert.Equal(t, status, dialects.GeminiHTTPStatus(reason), "GeminiHTTPStatus(%q)", reason)
	}
	s := dialects.Gemini.NewStream()
	data, _ := bytes.CutPrefix(bytes.TrimSpace(dialects.Gemini.StreamError("cut")), []byte("data: "))
	require.ErrorAs(t, s.Add(data), &ge)
	assert.Equal(t, "cut", ge.Message)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestGeminiModelsAndSecret: the model list and object in Gemini's shape,
// and the key read from x-goog-api-key or a bearer token.
func TestGeminiModelsAndSecret(t *testing.T) {
	rec := httptest.NewRecorder()
	dialects.Gemini.WriteModels(rec, []string{"gemini-2.5-pro"})
	assert.JSONEq(t, `{"models":[{"name":"models/gemini-2.5-pro","baseModelId":"gemini-2.5-pro","version":"001","displayName":"gemini-2.5-pro",
		"supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]}]}`, rec.Body.String())
	rec = httptest.NewRecorder()
	dialects.Gemini.WriteModel(rec, "models/gemini-2.5-flash")
	assert.Contains(t, rec.Body.String(), `"name":"models/gemini-2.5-flash"`)

	h := http.Header{}
	h.Set("X-Goog-Api-Key", "k1")
	assert.Equal(t, "k1", dialects.Gemini.Secret(h))
	h = http.Header{}
	h.Set("Authorization", "Bearer k2")
	assert.Equal(t, "k2", dialects.Gemini.Secret(h))
	assert.Equal(t, "/models/gemini-2.5-pro:streamGenerateContent?alt=sse", dialects.GeminiPath("gemini-2.5-pro", true))
	assert.NotContains(t, dialects.All, dialects.Gemini, "not routed yet")
}

// TestGeminiCountTokens: a countTokens request of contents or of a
// wrapped generateContentRequest, and its answer.
func TestGeminiCountTokens(t *testing.T) {
	for _, body := range []string{
		`{"contents":[{"role":"user","parts":[{"text":"abcdefgh"}]}]}`,
		`{"generateContentRequest":{"model":"models/gemini-2.5-pro","contents":[{"role":"user","parts":[{"text":"abcdefgh"}]}]}}`,
	} {
		req, err := dialects.ParseGeminiCountTokens([]byte(body))
		require.NoError(t, err)
		assert.Equal(t, 2, dialects.EstimateTokens(req), "ParseGeminiCountTokens(%s)", body)
	}
	assert.JSONEq(t, `{"totalTokens":7}`, string(dialects.GeminiCountTokensResponse(7)))
}
