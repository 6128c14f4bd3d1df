package interception_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/interception"
)

// TestRoutesAreServed: every route Routes lists is one the server answers
// (not its 404 for an unknown URL), so a suite that walks Routes walks the
// server.
func TestRoutesAreServed(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), func(c *interception.Config) { c.GatewayToken = gatewayToken })
	routes := interception.Routes()
	require.NotEmpty(t, routes)
	paths := map[string]bool{}
	for _, rt := range routes {
		paths[rt.Path] = true
		path := strings.ReplaceAll(rt.Path, "{id}", "listed-route")
		req, err := http.NewRequest(rt.Method, f.slot.LocalURL+path, strings.NewReader(`{"model":"m","messages":[]}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		token := f.slot.Secret
		if rt.Gateway {
			token = gatewayToken
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Api-Key", token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.NotContains(t, string(body), "unknown_url", "%s %s", rt.Method, rt.Path)
		assert.NotContains(t, string(body), "unknown gateway route", "%s %s", rt.Method, rt.Path)
		assert.NotEqual(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", rt.Method, rt.Path)
	}
	for _, p := range []string{"/healthz", "/v1/models", "/v1/chat/completions", "/v1/responses", "/v1/messages",
		"/v1/messages/count_tokens", "/v1/rollouts/{id}/register", "/v1/rollouts/{id}/trajectory", "/v1/rollouts/{id}/unregister"} {
		assert.True(t, paths[p], "Routes lists %s", p)
	}
}

// rawPost sends headers announcing a body of length bytes, then only
// sent of it, and reads the answer.
func rawPost(t *testing.T, base, path, header string, length int64, sent string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	// A server that waits for the rest of the body fails the test here.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, header, length, sent)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "answered without the rest of the body")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// A body announced larger than the limit is refused with a 413 in the
// route's shape before any of it is read: a 100 MB body costs no memory.
// The body read timeout is a minute, so a server reading first would not
// answer within the test's deadline.
func TestAnnouncedHugeBodyRefusedUnread(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a refused body reached the upstream")
	})
	f := newFixture(t, up.URL, func(c *interception.Config) {
		c.MaxBodyBytes = 1 << 20
		c.BodyReadTimeout = time.Minute
		c.GatewayToken = gatewayToken
	})
	for _, tt := range []struct {
		path, header string
		shape        string
	}{
		{"/v1/chat/completions", "Authorization: Bearer " + f.slot.Secret, "openai"},
		{"/v1/responses", "Authorization: Bearer " + f.slot.Secret, "openai"},
		{"/v1/messages", "X-Api-Key: " + f.slot.Secret, "anthropic"},
		{"/v1/messages/count_tokens", "X-Api-Key: " + f.slot.Secret, "anthropic"},
		{"/v1/rollouts/huge/register", "Authorization: Bearer " + gatewayToken, "gateway"},
	} {
		resp, body := rawPost(t, f.slot.LocalURL, tt.path, tt.header, 100<<20, "{")
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s: %s", tt.path, body)
		assert.True(t, resp.Close, "%s: the connection is not reused after an unread body", tt.path)
		var shape struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &shape), body)
		assert.Contains(t, shape.Error.Message, "larger than", tt.path)
		assert.Equal(t, tt.shape == "anthropic", shape.Type == "error", "%s: %s", tt.path, body)
		assert.Equal(t, tt.shape == "gateway", shape.Error.Type == "gateway_error", "%s: %s", tt.path, body)
	}
	assert.Equal(t, 1, f.pool.Rollouts(), "no gateway rollout registered beside the fixture's")
}

// A body that is JSON but not UTF-8 gets a 400 in the route's shape and
// never reaches the upstream.
func TestInvalidUTF8Refused(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a body that is not UTF-8 reached the upstream")
	})
	f := newFixture(t, up.URL, func(c *interception.Config) { c.GatewayToken = gatewayToken })
	body := "{\"model\":\"m\xff\xfe\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}],\"max_tokens\":5}"
	for _, tt := range []struct {
		path      string
		anthropic bool
	}{{"/v1/chat/completions", false}, {"/v1/responses", false}, {"/v1/messages", true}, {"/v1/messages/count_tokens", true}} {
		resp, got := f.post(t, tt.path, body, tt.anthropic)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", tt.path, got)
		assert.Contains(t, got, "not valid UTF-8", tt.path)
		var shape struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(got), &shape), got)
		assert.Equal(t, tt.anthropic, shape.Type == "error", "%s: %s", tt.path, got)
	}
	status, got := gatewayCall(t, http.MethodPost, f.slot.LocalURL+"/v1/rollouts/bad-utf8/register", gatewayToken, "{\"model\":\"m\xff\"}")
	assert.Equal(t, http.StatusBadRequest, status, string(got))
	assert.Contains(t, string(got), "gateway_error")
}

// A register body that drips in slower than the body read timeout gets a
// 408 in the gateway's shape, as a model call's does.
func TestGatewaySlowRegisterTimesOut(t *testing.T) {
	f := newFixture(t, strings.TrimSuffix(mockUpstream(t), "/v1"), func(c *interception.Config) {
		c.GatewayToken = gatewayToken
		c.BodyReadTimeout = 100 * time.Millisecond
	})
	resp, body := rawPost(t, f.slot.LocalURL, "/v1/rollouts/slow/register", "Authorization: Bearer "+gatewayToken, 1000, `{"model":`)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, body)
	assert.Contains(t, body, "gateway_error")
	assert.Contains(t, body, "did not arrive within 100ms")
}

// chunkedPost sends a chunked body of size bytes (head, then 'a's, then
// tail) and reads the answer.
func chunkedPost(t *testing.T, base, path, header, head, tail string, size int) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", path, header)
	require.NoError(t, err)
	go func() { // the server may answer before it has read it all
		cw := httputil.NewChunkedWriter(conn)
		body := io.MultiReader(strings.NewReader(head), io.LimitReader(repeatA{}, int64(size-len(head)-len(tail))), strings.NewReader(tail))
		if _, err := io.Copy(cw, body); err == nil {
			_ = cw.Close()
			_, _ = io.WriteString(conn, "\r\n")
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

type repeatA struct{}

func (repeatA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// A chunked body over the limit is refused with a 413 without the server
// holding it: the process allocates a small part of the limit, not the
// limit (io.ReadAll's doublings allocated twice the limit, and the heap the
// runtime keeps grew with them).
func TestChunkedHugeBodyRefusedWithoutHoldingIt(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a refused body reached the upstream")
	})
	const limit = interception.DefaultMaxBodyBytes
	f := newFixture(t, up.URL, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, body := chunkedPost(t, f.slot.LocalURL, "/v1/chat/completions", "Authorization: Bearer "+f.slot.Secret,
		`{"model":"m","messages":[{"role":"user","content":"`, `"}]}`, limit+(4<<20))
	runtime.ReadMemStats(&after)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	assert.Contains(t, body, "larger than")
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a refused %d-byte chunked body: %d bytes allocated", limit+(4<<20), allocated)
	assert.Less(t, allocated, uint64(limit/4), "allocated %d bytes for a refused %d-byte body", allocated, limit+(4<<20))
}

// A chunked body longer than what is kept in memory, within the limit,
// arrives whole.
func TestChunkedBodyPastMemoryArrivesWhole(t *testing.T) {
	const size = 3 << 20
	got := make(chan int, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if assert.NoError(t, json.Unmarshal(b, &req)) && assert.Len(t, req.Messages, 1) {
			got <- len(req.Messages[0].Content)
			assert.True(t, strings.HasSuffix(req.Messages[0].Content, "a-the-end"))
		}
		writeJSON(w, http.StatusOK, toolCompletion)
	})
	f := newFixture(t, up.URL, nil)
	head, tail := `{"model":"m","messages":[{"role":"user","content":"`, `-the-end"}]}`
	resp, body := chunkedPost(t, f.slot.LocalURL, "/v1/chat/completions", "Authorization: Bearer "+f.slot.Secret, head, tail, size)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, size-len(head)-len(`"}]}`), <-got, "every byte of the content arrived")
}
