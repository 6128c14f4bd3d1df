package interception

import (
	"context"
	"net/http"

	"github.com/evalflow/evalflow/dialects"
)

// Upstream is the model provider a server sends its calls to;
// providers.Client is the implementation.
type Upstream interface {
	// Dialect names the wire format the upstream speaks (dialects.ByName).
	Dialect() string
	// Relay POSTs body to the route path below /v1 (e.g.
	// "/chat/completions"), retrying 429/5xx/connection errors before any
	// byte reaches the caller. h holds the caller's request headers on the
	// relay arm, for the upstream to forward the ones that describe the
	// request; it is nil on the translate arm. attempts is how many
	// attempts the call took, failed or not.
	Relay(ctx context.Context, path string, h http.Header, body dialects.Body) (resp *http.Response, attempts int, err error)
}

// upstreamDialect is the dialect u speaks: chat when it names none the
// dialects package knows.
func upstreamDialect(u Upstream) dialects.Dialect {
	if d, err := dialects.ByName(u.Dialect()); err == nil {
		return d
	}
	return dialects.Chat
}
