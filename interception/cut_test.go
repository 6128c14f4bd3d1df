package interception_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
)

// cutUpstream answers its first cuts calls with the head of answer and
// then closes the connection, the rest of the body never sent, and the
// later ones with the whole answer. framing is how the cut answers are
// framed: with a Content-Length, chunked, or delimited by the connection's
// end, where the cut looks like an end.
func cutUpstream(t *testing.T, cuts int32, framing, answer string, at int, calls *atomic.Int32) string {
	t.Helper()
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > cuts {
			writeJSON(w, http.StatusOK, answer)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		head := answer[:at]
		switch framing {
		case "length":
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), head)
		case "chunked":
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(head), head)
		case "close":
			_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n%s", head)
		}
		_ = buf.Flush()
	}).URL + "/v1"
}

// A connection cut in the middle of the upstream's answer on the translate
// arm is retried like on the relay arm: nothing of it reached the caller,
// who gets a 200 and a turn that counts the attempts. Cut points include
// one just after a closing brace, where a cut answer framed by the
// connection's end still looks like a JSON object.
func TestTranslateRetriesACutConnection(t *testing.T) {
	const cuts = 2
	for _, framing := range []string{"length", "chunked", "close"} {
		t.Run("chat→anthropic/"+framing, func(t *testing.T) {
			at := len(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hm","signature":"sig-keep"}`)
			var calls atomic.Int32
			f := dialectFixture(t, dialects.NameAnthropic, cutUpstream(t, cuts, framing, anthropicMessage, at, &calls), nil)
			got, err := f.client(f.slot.Secret).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			require.NoError(t, err)
			require.NotEmpty(t, got.Choices)
			assert.Equal(t, "hi", got.Choices[0].Message.Content)
			turn := f.turn(t)
			assert.Equal(t, http.StatusOK, turn.Status)
			assert.Equal(t, cuts+1, turn.Attempts)
			assert.Empty(t, turn.UpstreamFailure)
			assert.Equal(t, int32(cuts+1), calls.Load())
		})
		t.Run("anthropic→chat/"+framing, func(t *testing.T) {
			at := len(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"run-model-2026",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"need to add",
"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":1,\"b\":2}"}}`)
			var calls atomic.Int32
			f := dialectFixture(t, dialects.NameChat, cutUpstream(t, cuts, framing, toolCompletion, at, &calls), nil)
			ac := f.anthropic(f.slot.Secret)
			msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model: "m", MaxTokens: 10, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			require.NoError(t, err)
			require.NotEmpty(t, msg.Content)
			assert.Equal(t, "add", msg.Content[len(msg.Content)-1].Name)
			turn := f.turn(t)
			assert.Equal(t, http.StatusOK, turn.Status)
			assert.Equal(t, cuts+1, turn.Attempts)
			assert.Empty(t, turn.UpstreamFailure)
			assert.Equal(t, int32(cuts+1), calls.Load())
		})
	}
}
