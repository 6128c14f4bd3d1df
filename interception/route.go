package interception

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/evalflow/evalflow/dialects"
	"github.com/evalflow/evalflow/trace"
)

// Target is a named provider a role of a rollout calls (rollout.Target
// with its upstream found): Rollout.Policy and Rollout.User list them.
type Target struct {
	// Name is the provider's name, recorded on every turn it answers.
	Name     string
	Upstream Upstream
	// Model, when set, replaces the model the role asks (a persona's).
	Model string
}

// Fallible says whether a call's outcome is the provider's own failure, so
// that the next provider of a route may take the call: an error (the
// connection failed, the call timed out) or a 429 or 5xx answer after the
// provider's retries. A 4xx other than 429 is the request's fault, which
// another provider would refuse alike: no fallback.
func Fallible(resp *http.Response, err error) trace.UpstreamFailure {
	if err != nil {
		return failureOf(err)
	}
	return statusFailure(resp.StatusCode)
}

// Fallback calls the n providers of a route in order through call, moving
// to the next one only when the one before failed (Fallible) and ctx is
// live. It returns the last outcome, the attempts of all calls, and at,
// the index of the provider that gave it: the ones before it failed.
func Fallback(ctx context.Context, n int, call func(i int) (*http.Response, int, error)) (resp *http.Response, attempts, at int, err error) {
	for i := range n {
		var k int
		resp, k, err = call(i)
		attempts += k
		if i == n-1 || ctx.Err() != nil || Fallible(resp, err) == "" {
			return resp, attempts, i, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
	}
	return nil, attempts, 0, fmt.Errorf("no provider to call") // n == 0
}

// answered records on turn which provider of route answered, at, and the
// ones it fell back from. A route of the server's own upstream names none.
func answered(turn *trace.Turn, route []Target, at int) {
	if route[at].Name == "" {
		return
	}
	turn.Provider = route[at].Name
	turn.FallbackFrom = nil
	for _, t := range route[:at] {
		turn.FallbackFrom = append(turn.FallbackFrom, t.Name)
	}
}

// policy is the route of a rollout's model calls.
func (s *Server) policy(r Rollout) []Target {
	if len(r.Policy) > 0 {
		return r.Policy
	}
	return []Target{{Upstream: s.cfg.Upstream}}
}

// user is the route of a rollout's simulated user.
func (s *Server) user(r Rollout) []Target {
	if len(r.User) > 0 {
		return r.User
	}
	return []Target{{Upstream: s.cfg.Upstream}}
}

// checkRoutes refuses a policy route whose providers speak another dialect
// than the server's upstream: its calls are relayed or translated for that
// dialect before a provider is picked.
func (s *Server) checkRoutes(r Rollout) error {
	for _, t := range r.Policy {
		if t.Upstream == nil {
			return fmt.Errorf("provider %s: no upstream", t.Name)
		}
		if d := upstreamDialect(t.Upstream); d.Name() != s.up.Name() {
			return &RouteError{fmt.Sprintf("the policy's provider %s speaks %s, and this worker's default provider %s: a policy provider speaks the default's dialect", t.Name, d.Name(), s.up.Name())}
		}
	}
	for _, t := range r.User {
		if t.Upstream == nil {
			return fmt.Errorf("provider %s: no upstream", t.Name)
		}
	}
	return nil
}

// RouteError is a rollout whose roles this worker cannot serve: a
// configuration error, the same on every retry.
type RouteError struct{ msg string }

func (e *RouteError) Error() string { return e.msg }

// relayRoute sends a call through route: the server's upstream alone, or
// the rollout's policy providers with their fallbacks. A caller retrying on
// its own gets a single attempt of each provider (see entry.begin).
func relayRoute(ctx context.Context, route []Target, once bool, path string, h http.Header, body dialects.Body) (*http.Response, int, int, error) {
	return Fallback(ctx, len(route), func(i int) (*http.Response, int, error) {
		up := route[i].Upstream
		if o, ok := up.(onceUpstream); ok && once {
			return o.RelayOnce(ctx, path, h, body)
		}
		return up.Relay(ctx, path, h, body)
	})
}
