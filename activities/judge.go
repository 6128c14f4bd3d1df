package activities

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception"
	"github.com/evalflow/evalflow/internal/prices"
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
// With a route (the run's judge role) it asks the route's providers in
// order, each after the one before failed for the infrastructure.
type judge struct {
	provider Provider
	// route, when set, replaces provider.
	route []interception.Target
	// model is asked when the rubric names none: the run's.
	model string
	// prices price each call, as the interception servers price the
	// harness's.
	prices prices.Table

	mu    sync.Mutex
	turns []trace.Turn
}

var _ rubrics.Judge = (*judge)(nil)

// Ask sends prompt as a user message and returns the reply's text.
func (j *judge) Ask(ctx context.Context, model, prompt string) (string, error) {
	if model == "" {
		model = j.model
	}
	route := j.route
	if len(route) == 0 {
		route = []interception.Target{{Upstream: j.provider}}
	}
	req := dialects.Request{Model: model, Messages: []dialects.Message{
		{Role: "user", Content: []dialects.Part{{Type: "text", Text: prompt}}},
	}}
	turn := trace.Turn{Route: "judge", Request: req, StartedAt: time.Now()}
	defer func() {
		turn.Latency = time.Since(turn.StartedAt)
		j.record(turn)
	}()
	var d dialects.Dialect
	resp, attempts, at, err := interception.Fallback(ctx, len(route), func(i int) (*http.Response, int, error) {
		var err error
		if d, err = dialects.ByName(route[i].Upstream.Dialect()); err != nil {
			return nil, 0, err
		}
		req := req
		if route[i].Model != "" {
			req.Model = route[i].Model
		}
		body, err := d.EncodeRequest(req)
		if err != nil {
			return nil, 0, fmt.Errorf("encode judge request: %w", err)
		}
		return route[i].Upstream.Relay(ctx, d.Path(), nil, dialects.Body{body})
	})
	turn.Attempts = attempts
	if d != nil {
		turn.Dialect = d.Name()
	}
	if t := route[at]; t.Name != "" {
		turn.Provider = t.Name
		for _, f := range route[:at] {
			turn.FallbackFrom = append(turn.FallbackFrom, f.Name)
		}
		if t.Model != "" {
			turn.Request.Model = t.Model
		}
	}
	if err != nil {
		turn.Error = err.Error()
		turn.UpstreamFailure = interception.Fallible(nil, err)
		return "", err
	}
	defer resp.Body.Close()
	turn.Status = resp.StatusCode
	turn.UpstreamFailure = interception.Fallible(resp, nil)
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
	t = interception.Priced(t, j.prices, t.Request.Model)
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
