package interception

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/interception/sidecar"
	"github.com/evalflow/evalflow/trace"
)

// Upstream is the model provider a server sends its calls to;
// providers.Client is the implementation.
type Upstream interface {
	// Dialect names the wire format the upstream speaks (dialects.ByName).
	Dialect() string
	// Relay POSTs body to the route path below /v1 (e.g.
	// "/chat/completions"), retrying failures (429/5xx, connection errors,
	// timeouts) before any byte reaches the caller. h holds the caller's
	// request headers on the relay arm, for the upstream to forward the
	// ones that describe the request; on the translate arm, at most the
	// caller's beta header toward an upstream of its family (headers.go).
	// attempts is how many attempts the call took, failed or not.
	//
	// Errors, from Relay and from reading an answer's body, may say how
	// the upstream failed with an UpstreamFailure method returning one of
	// trace.UpstreamFailure's values, or with Timeout, as net.Error does;
	// any other is a connection failure.
	Relay(ctx context.Context, path string, h http.Header, body dialects.Body) (resp *http.Response, attempts int, err error)
}

// onceUpstream is an Upstream that can make a single attempt at a call,
// for a caller that retries on its own (providers.Client can). Another
// Upstream gets its own retries for every call.
type onceUpstream interface {
	RelayOnce(ctx context.Context, path string, h http.Header, body dialects.Body) (resp *http.Response, attempts int, err error)
}

// upstreamDialect is the dialect u speaks: chat when it names none the
// dialects package knows.
func upstreamDialect(u Upstream) dialects.Dialect {
	if d, err := dialects.ByName(u.Dialect()); err == nil {
		return d
	}
	return dialects.Chat
}

// failureOf says how an upstream error failed the call (see Upstream).
func failureOf(err error) trace.UpstreamFailure {
	var f interface{ UpstreamFailure() string }
	if errors.As(err, &f) {
		return trace.UpstreamFailure(f.UpstreamFailure())
	}
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return trace.UpstreamTimeout
	}
	return trace.UpstreamConnection
}

// statusFailure says whether an upstream's status is its own failure: a
// 429 or a 5xx, retried until the upstream gave up.
func statusFailure(status int) trace.UpstreamFailure {
	if status == http.StatusTooManyRequests || status >= 500 {
		return trace.UpstreamStatus
	}
	return ""
}

// personaAnswerLimit bounds a persona's answer read from the provider.
const personaAnswerLimit = 8 << 20

// Ask makes a persona's call (package sidecar) through the rollout's user
// route (the server's upstream unless the run names the user's providers),
// the one call upstream that is not a harness's. Each provider gets the
// request in its own dialect.
func (p sideProxy) Ask(ctx context.Context, ro sidecar.Rollout, turn *trace.Turn) (string, error) {
	route := []Target{{Upstream: p.s.cfg.Upstream}}
	if e, ok := ro.(*entry); ok {
		route = p.s.user(e.rollout)
	}
	var d dialects.Dialect
	resp, attempts, at, err := Fallback(ctx, len(route), func(i int) (*http.Response, int, error) {
		d = upstreamDialect(route[i].Upstream)
		req := turn.Request
		if route[i].Model != "" {
			req.Model = route[i].Model
		}
		body, err := d.EncodeRequest(req)
		if err != nil {
			return nil, 0, fmt.Errorf("encode persona request: %w", err)
		}
		return route[i].Upstream.Relay(ctx, d.Path(), nil, dialects.Body{body})
	})
	turn.Dialect = d.Name()
	turn.Attempts = attempts
	answered(turn, route, at)
	if route[at].Model != "" {
		turn.Request.Model = route[at].Model
	}
	if err != nil {
		if f := Fallible(nil, err); f != "" {
			turn.UpstreamFailure = f
		}
		return "", err
	}
	defer resp.Body.Close()
	turn.Status = resp.StatusCode
	turn.UpstreamFailure = statusFailure(resp.StatusCode)
	data, err := io.ReadAll(io.LimitReader(resp.Body, personaAnswerLimit))
	if err != nil {
		return "", fmt.Errorf("read persona answer: %w", err)
	}
	turn.TTFT = time.Since(turn.StartedAt)
	if resp.StatusCode != http.StatusOK {
		return "", d.ParseError(resp.StatusCode, data)
	}
	if turn.Response, err = d.ParseResponse(data); err != nil {
		return "", fmt.Errorf("decode persona answer: %w", err)
	}
	// Priced at the server's prices like the harness's calls; the user's
	// calls count against none of the rollout's limits, --max-cost included.
	*turn = Priced(*turn, p.s.cfg.Prices, turn.Request.Model)
	return turn.Response.Message.Text(), nil
}
