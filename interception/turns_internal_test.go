package interception

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

const (
	chatBody   = `{"model":"caller","messages":[{"role":"user","content":"hi"}]}`
	chatAnswer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`
	chatError  = `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`
)

// TestMaterialize checks the typed fields parsed from a relayed turn's raw
// bytes, including a request the typed parser rejects: the overlay, which
// only checks shape, may let through what the parser refuses.
func TestMaterialize(t *testing.T) {
	r := Rollout{Model: "run-model"}
	tests := []struct {
		name      string
		raw       rawTurn
		wantModel string // of the request; "" when it does not parse
		wantText  string
		wantError string // a prefix; none when ""
	}{
		{name: "answered", raw: rawTurn{request: []byte(chatBody), answered: true, status: 200, answer: []byte(chatAnswer)},
			wantModel: "run-model", wantText: "hello"},
		{name: "not answered", raw: rawTurn{request: []byte(chatBody)}, wantModel: "run-model"},
		{name: "error answer", raw: rawTurn{request: []byte(chatBody), answered: true, status: 429, answer: []byte(chatError)},
			wantModel: "run-model", wantError: "status 429: "},
		{name: "request the parser rejects", raw: rawTurn{request: []byte(`{"messages":7}`), answered: true, status: 200, answer: []byte(chatAnswer)},
			wantText: "hello", wantError: "trace: parse request: "},
		{name: "both rejected", raw: rawTurn{request: []byte(`{"messages":7}`), answered: true, status: 429, answer: []byte(chatError)},
			wantError: "trace: parse request: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.raw.dialect = dialects.Chat
			got := materialize(trace.Turn{Index: 3, Status: tt.raw.status}, tt.raw, r)
			assert.Equal(t, 3, got.Index)
			assert.Equal(t, tt.raw.status, got.Status)
			assert.Equal(t, tt.wantModel, got.Request.Model)
			assert.Equal(t, tt.wantText, got.Response.Message.Text())
			assert.True(t, strings.HasPrefix(got.Error, tt.wantError), "Error = %q, want prefix %q", got.Error, tt.wantError)
			if tt.wantError == "" {
				assert.Empty(t, got.Error)
			}
		})
	}
}

// TestSnapshotMaterializesOnce checks that a read keeps the parsed turns in
// place of their raw bytes, and that a turn whose request does not parse is
// still returned, saying so.
func TestSnapshotMaterializesOnce(t *testing.T) {
	e := &entry{rollout: Rollout{Model: "run-model"}}
	e.record(begin(e), trace.Turn{Status: 200}, &rawTurn{dialect: dialects.Chat, request: []byte(chatBody),
		answered: true, status: 200, answer: []byte(chatAnswer)}, false)
	e.record(begin(e), trace.Turn{Status: 200}, &rawTurn{dialect: dialects.Chat, request: []byte(`{"messages":7}`)}, false)
	e.record(begin(e), trace.Turn{Status: 502, Error: "upstream: down"}, nil, false)

	turns := e.snapshot()
	require.Len(t, turns, 3)
	assert.Equal(t, "run-model", turns[0].Request.Model)
	assert.Equal(t, "hello", turns[0].Response.Message.Text())
	assert.True(t, strings.HasPrefix(turns[1].Error, "trace: "), "Error = %q", turns[1].Error)
	assert.Equal(t, "upstream: down", turns[2].Error)
	assert.Nil(t, e.unparsed, "the raw bytes are let go once parsed")
	assert.Equal(t, turns, e.turns, "the parsed turns are kept")
	assert.Equal(t, turns, e.snapshot())
	assert.Equal(t, turns[1], e.turn(1))
}

// TestSnapshotRaces reads turns from two readers while more are recorded:
// each reader gets every turn recorded before it, parsed.
func TestSnapshotRaces(t *testing.T) {
	const n = 200
	e := &entry{rollout: Rollout{Model: "run-model"}}
	record := func() {
		e.record(begin(e), trace.Turn{Status: 200}, &rawTurn{dialect: dialects.Chat, request: []byte(chatBody),
			answered: true, status: 200, answer: []byte(chatAnswer)}, false)
	}
	for range n / 2 {
		record()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range n / 2 {
			record()
		}
	})
	for range 2 {
		wg.Go(func() {
			turns := e.snapshot()
			assert.GreaterOrEqual(t, len(turns), n/2)
			for i, turn := range turns {
				assert.Equal(t, i, turn.Index)
				assert.Equal(t, "run-model", turn.Request.Model, "turn %d", i)
				assert.Equal(t, "hello", turn.Response.Message.Text(), "turn %d", i)
			}
		})
	}
	wg.Wait()
	turns := e.snapshot()
	require.Len(t, turns, n)
	for i, turn := range turns {
		assert.Equal(t, "run-model", turn.Request.Model, "turn %d", i)
	}
	assert.Nil(t, e.unparsed)
}

// begin numbers a call that says nothing of retries.
func begin(e *entry) int {
	i, _ := e.begin(nil)
	return i
}
