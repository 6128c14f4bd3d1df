package interception_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/providers/mock"
)

// recordingMock is the mock model behind a server that keeps what reached
// it: each model call's body, decoded, and its Authorization header, in
// order.
type recordingMock struct {
	root, url string // the server's address; its /v1
	mu        sync.Mutex
	bodies    []map[string]any
	keys      []string
}

// modelRoutes are the routes of a model call, in each dialect.
var modelRoutes = []string{"/chat/completions", "/responses", "/messages"}

func newRecordingMock(t *testing.T) *recordingMock {
	t.Helper()
	m, err := mock.New(mock.Config{})
	require.NoError(t, err)
	rec := &recordingMock{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if !assert.NoError(t, err) {
			return
		}
		var body map[string]any
		if isModelCall(r) && assert.NoError(t, json.Unmarshal(b, &body)) {
			rec.mu.Lock()
			rec.bodies = append(rec.bodies, body)
			rec.keys = append(rec.keys, r.Header.Get("Authorization"))
			rec.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.root, rec.url = srv.URL, srv.URL+"/v1"
	return rec
}

func isModelCall(r *http.Request) bool {
	for _, route := range modelRoutes {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, route) {
			return true
		}
	}
	return false
}

// take returns the bodies received since the last take.
func (m *recordingMock) take() []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.bodies
	m.bodies, m.keys = nil, nil
	return out
}

// seen returns the bodies and Authorization headers received so far.
func (m *recordingMock) seen() ([]map[string]any, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]any{}, m.bodies...), append([]string{}, m.keys...)
}
