package activities

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/rubrics"
	"github.com/evalflow/evalflow/trace"
)

// Provider is the model provider judge rubrics ask: the worker's upstream
// (a *providers.Client), the one its interception servers relay to, so that
// judge calls share its retries and its concurrency limit.
type Provider interface {
	// Dialect names the wire format the provider speaks.
	Dialect() string
	// Relay POSTs body to the route path below /v1, retrying the
	// provider's failures.
	Relay(ctx context.Context, path string, h http.Header, body dialects.Body) (*http.Response, int, error)
}

// judgeAnswerLimit bounds a judge's answer read from the provider.
const judgeAnswerLimit = 8 << 20

// judge asks the worker's provider for a judge rubric, in the provider's
// own dialect, and records every call as a turn of the rollout's trace.
type judge struct {
	provider Provider
	// model is asked when the rubric names none: the run's.
	model string

	mu    sync.Mutex
	turns []trace.Turn
}

var _ rubrics.Judge = (*judge)(nil)

// Ask sends prompt as a user message and returns the reply's text.
func (j *judge) Ask(ctx context.Context, model, prompt string) (string, error) {
	if model == "" {
		model = j.model
	}
	d, err := dialects.ByName(j.provider.Dialect())
	if err != nil {
		return "", err
	}
	req := dialects.Request{Model: model, Messages: []dialects.Message{
		{Role: "user", Content: []dialects.Part{{Type: "text", Text: prompt}}},
	}}
	turn := trace.Turn{Dialect: d.Name(), Route: "judge", Request: req, StartedAt: time.Now()}
	defer func() {
		turn.Latency = time.Since(turn.StartedAt)
		j.record(turn)
	}()
	body, err := d.EncodeRequest(req)
	if err != nil {
		turn.Error = err.Error()
		return "", fmt.Errorf("encode judge request: %w", err)
	}
	resp, attempts, err := j.provider.Relay(ctx, d.Path(), nil, dialects.Body{body})
	turn.Attempts = attempts
	if err != nil {
		turn.Error = err.Error()
		return "", err
	}
	defer resp.Body.Close()
	turn.Status = resp.StatusCode
	data, err := io.ReadAll(io.LimitReader(resp.Body, judgeAnswerLimit))
	if err != nil {
		turn.Error = err.Error()
		return "", fmt.Errorf("read judge answer: %w", err)
	}
	turn.TTFT = time.Since(turn.StartedAt)
	if resp.StatusCode != http.StatusOK {
		err := d.ParseError(resp.StatusCode, data)
		turn.Error = err.Error()
		return "", err
	}
	if turn.Response, err = d.ParseResponse(data); err != nil {
		turn.Error = err.Error()
		return "", fmt.Errorf("decode judge answer: %w", err)
	}
	return turn.Response.Message.Text(), nil
}

func (j *judge) record(t trace.Turn) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t.Index = len(j.turns)
	j.turns = append(j.turns, t)
}

// calls returns the turns recorded so far.
func (j *judge) calls() []trace.Turn {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]trace.Turn(nil), j.turns...)
}
