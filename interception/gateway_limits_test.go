package interception_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/activities"
	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/interception/gateway"
	"github.com/evalflow/evalflow/providers"
	"github.com/evalflow/evalflow/providers/mock"
	"github.com/evalflow/evalflow/trace"
)

// clock is a settable clock for gateway expiries.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// gatewayRig is a pool in front of the mock model (chat) whose gateway is
// served at a stable address of its own, on a worker's capacity.
type gatewayRig struct {
	pool  *interception.Pool
	addr  string // the gateway's root URL
	clock *clock
	slots *activities.Capacity
}

func newGatewayRig(t *testing.T, capacity int) gatewayRig {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	up := httptest.NewServer(m)
	t.Cleanup(up.Close)
	return newGatewayRigAt(t, capacity, up.URL)
}

// newGatewayRigAt is a gatewayRig in front of the chat upstream at url.
func newGatewayRigAt(t *testing.T, capacity int, url string) gatewayRig {
	t.Helper()
	clk := &clock{now: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}
	slots := activities.NewCapacity(capacity)
	pool := interception.NewPool(interception.Config{
		Upstream: providers.NewOpenAI(url+"/v1", "upstream-key"), GatewayToken: gatewayToken,
		GatewayTTL: 2 * time.Hour, GatewaySlots: slots, Now: clk.Now,
	})
	t.Cleanup(func() { assert.NoError(t, pool.Close()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: pool.GatewayHandler()}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return gatewayRig{pool: pool, addr: "http://" + ln.Addr().String(), clock: clk, slots: slots}
}

func (g gatewayRig) register(t *testing.T, id, body string) (int, gateway.Registration) {
	t.Helper()
	status, out := gatewayCall(t, http.MethodPost, g.addr+"/v1/rollouts/"+id+"/register", gatewayToken, body)
	var reg gateway.Registration
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal(out, &reg))
	}
	return status, reg
}

func (g gatewayRig) trajectory(t *testing.T, id string) (int, gateway.Trajectory) {
	t.Helper()
	status, out := gatewayCall(t, http.MethodGet, g.addr+"/v1/rollouts/"+id+"/trajectory", gatewayToken, "")
	var tr gateway.Trajectory
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal(out, &tr))
	}
	return status, tr
}

func chatClient(reg gateway.Registration) openai.Client {
	return openai.NewClient(option.WithBaseURL(reg.OpenAIBaseURL+"/"), option.WithAPIKey(reg.APIKey), option.WithMaxRetries(0))
}

func ask(c openai.Client, msgs ...openai.ChatCompletionMessageParamUnion) (*openai.ChatCompletion, error) {
	return c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "anything", Messages: msgs})
}

// The gateway has an address of its own: trainers register there, and
// agents call their rollout's model routes below it with the official
// SDKs, in any dialect.
func TestGatewayStableAddress(t *testing.T) {
	g := newGatewayRig(t, 4)
	status, reg := g.register(t, "r1", `{"model":"policy"}`)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, g.addr+"/v1/rollouts/r1", reg.BaseURL, "the agent's base URL is on the gateway's address")

	resp, err := ask(chatClient(reg), openai.UserMessage("What is 2 + 3?"))
	require.NoError(t, err)
	assert.Contains(t, resp.Choices[0].Message.Content, "5")

	ac := anthropic.NewClient(aoption.WithBaseURL(reg.BaseURL), aoption.WithAPIKey(reg.APIKey), aoption.WithMaxRetries(0))
	msg, err := ac.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "anything", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 4 + 4?"))}})
	require.NoError(t, err)
	assert.Contains(t, msg.Content[0].Text, "8")

	bad := chatClient(gateway.Registration{OpenAIBaseURL: reg.OpenAIBaseURL, APIKey: "wrong"})
	_, err = ask(bad, openai.UserMessage("hi"))
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode, "the rollout's secret is still checked")

	status, tr := g.trajectory(t, "r1")
	require.Equal(t, http.StatusOK, status)
	require.Len(t, tr.Turns, 2, "a call with a wrong secret is no turn")
	assert.Equal(t, "policy", tr.Turns[0].Request.Model)
	assert.Equal(t, dialects.NameAnthropic, tr.Turns[1].Dialect)

	status, _ = gatewayCall(t, http.MethodGet, g.addr+"/healthz", "", "")
	assert.Equal(t, http.StatusOK, status)
	status, _ = gatewayCall(t, http.MethodPost, g.addr+"/v1/rollouts/r1/register", "wrong-token", `{"model":"policy"}`)
	assert.Equal(t, http.StatusUnauthorized, status)
	_, err = ask(chatClient(gateway.Registration{OpenAIBaseURL: g.addr + "/v1/rollouts/nobody/v1", APIKey: reg.APIKey}), openai.UserMessage("hi"))
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode, "an unregistered rollout")
}

// register's max_turns, max_tokens and max_seq_len are enforced like a
// run's limits: the call past one is refused with a 400 in the caller's
// dialect, and the trajectory says the rollout was truncated and by what.
func TestGatewayRegisterLimits(t *testing.T) {
	for _, tc := range []struct {
		name, body, limit string
		answered          int
	}{
		{"max_turns", `{"model":"policy","max_turns":2}`, trace.LimitTurns, 2},
		{"max_tokens", `{"model":"policy","max_tokens":5}`, trace.LimitTokens, 1},
		{"max_seq_len", `{"model":"policy","max_seq_len":6}`, trace.LimitSeqLen, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGatewayRig(t, 4)
			status, reg := g.register(t, "lim", tc.body)
			require.Equal(t, http.StatusOK, status)
			c := chatClient(reg)
			var err error
			for i := range tc.answered {
				_, err = ask(c, openai.UserMessage("What is 2 + 3?"))
				require.NoError(t, err, "call %d", i+1)
			}
			_, err = ask(c, openai.UserMessage("What is 2 + 3?"))
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
			assert.Equal(t, "rollout_limit_reached", apiErr.Code)

			status, tr := g.trajectory(t, "lim")
			require.Equal(t, http.StatusOK, status)
			require.Len(t, tr.Turns, tc.answered+1)
			assert.True(t, tr.IsTruncated)
			assert.Equal(t, tc.limit, tr.Limit)
			assert.Equal(t, tc.limit, tr.Turns[tc.answered].Limit)
			if tc.limit == trace.LimitSeqLen {
				require.NotNil(t, tr.Turns[0].Request.Sampling.MaxTokens)
				assert.Equal(t, 6, *tr.Turns[0].Request.Sampling.MaxTokens, "each call's max tokens is capped at max_seq_len")
			}
		})
	}
	g := newGatewayRig(t, 4)
	status, _ := g.register(t, "neg", `{"model":"policy","max_seq_len":-1}`)
	assert.Equal(t, http.StatusBadRequest, status)
	status, _ = g.register(t, "ttl", `{"model":"policy","ttl":"soon"}`)
	assert.Equal(t, http.StatusBadRequest, status)
}

// The trajectory holds the prompt, the completion that followed it, each
// turn's token data when the registration traces tokens, and is_truncated.
func TestGatewayTrajectory(t *testing.T) {
	g := newGatewayRig(t, 4)
	status, reg := g.register(t, "tj", `{"model":"policy","trace_tokens":true,"top_logprobs":2}`)
	require.Equal(t, http.StatusOK, status)
	c := chatClient(reg)
	first, err := ask(c, openai.UserMessage("What is 2 + 3?"))
	require.NoError(t, err)
	second, err := ask(c, openai.UserMessage("What is 2 + 3?"),
		openai.AssistantMessage(first.Choices[0].Message.Content), openai.UserMessage("What is 4 + 4?"))
	require.NoError(t, err)

	status, body := gatewayCall(t, http.MethodPost, g.addr+"/v1/rollouts/tj/unregister", gatewayToken, "")
	require.Equal(t, http.StatusOK, status)
	var tr gateway.Trajectory
	require.NoError(t, json.Unmarshal(body, &tr))
	assert.False(t, tr.IsTruncated)
	require.Len(t, tr.Prompt, 1)
	assert.Equal(t, "What is 2 + 3?", tr.Prompt[0].Text())
	var roles, texts []string
	for _, m := range tr.Completion {
		roles = append(roles, m.Role)
		texts = append(texts, m.Text())
	}
	assert.Equal(t, []string{dialects.RoleAssistant, dialects.RoleUser, dialects.RoleAssistant}, roles)
	assert.Equal(t, []string{first.Choices[0].Message.Content, "What is 4 + 4?", second.Choices[0].Message.Content}, texts)

	require.Len(t, tr.Tokens, 2)
	assert.Equal(t, 1, tr.Tokens[1].Turn)
	assert.Equal(t, "stop", tr.Tokens[1].FinishReason)
	require.NotNil(t, tr.Tokens[1].Tokens)
	assert.Equal(t, dialects.TokenIDs(mock.TokenIDs(second.Choices[0].Message.Content)), tr.Tokens[1].CompletionIDs)
	assert.Equal(t, dialects.TokenIDs(mock.TokenIDs("What is 2 + 3?"+first.Choices[0].Message.Content+"What is 4 + 4?")), tr.Tokens[1].PromptIDs)
	assert.Len(t, tr.Tokens[1].Logprobs, len(tr.Tokens[1].CompletionIDs))
	assert.Equal(t, 2, tr.Tokens[1].TopK)
	assert.True(t, strings.Contains(string(body), `"completion_ids":"`), "token ids are packed")
}

// Registrations expire after their TTL, when the sweeper runs, as if
// unregistered: their secret stops working, their trajectory is gone, and
// their unit of the worker's capacity is given back.
func TestGatewayRegistrationsExpire(t *testing.T) {
	g := newGatewayRig(t, 1)
	status, short := g.register(t, "short", `{"model":"policy","ttl":"1h"}`)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, g.clock.Now().Add(time.Hour), short.ExpiresAt)
	_, err := ask(chatClient(short), openai.UserMessage("What is 2 + 3?"))
	require.NoError(t, err)

	status, _ = g.register(t, "long", `{"model":"policy"}`)
	assert.Equal(t, http.StatusServiceUnavailable, status, "the worker's one unit of capacity is the gateway rollout's")
	_, free := g.slots.TryTake()
	assert.False(t, free, "a workflow rollout waits for it too")

	g.clock.advance(59 * time.Minute)
	assert.Empty(t, g.pool.SweepGateway(), "not expired yet")
	status, _ = g.trajectory(t, "short")
	assert.Equal(t, http.StatusOK, status)

	g.clock.advance(time.Minute)
	assert.Equal(t, []string{"short"}, g.pool.SweepGateway())
	status, _ = g.trajectory(t, "short")
	assert.Equal(t, http.StatusNotFound, status)
	_, err = ask(chatClient(short), openai.UserMessage("What is 2 + 3?"))
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.StatusCode, "the expired rollout is gone")
	assert.Zero(t, g.pool.Rollouts(), "its slot is released")

	status, long := g.register(t, "long", `{"model":"policy"}`)
	require.Equal(t, http.StatusOK, status, "its capacity is back")
	assert.Equal(t, g.clock.Now().Add(2*time.Hour), long.ExpiresAt, "the gateway's default TTL")
	g.clock.advance(2 * time.Hour)
	assert.Equal(t, []string{"long"}, g.pool.SweepGateway())
	_, free = g.slots.TryTake()
	assert.True(t, free, "nothing leaked")
}
