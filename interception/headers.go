package interception

import (
	"net/http"

	"github.com/evalflow/evalflow/dialects"
)

// A relayed call forwards the caller's headers that describe it and
// passes back all of the upstream's (relay.go, providers.Client.Relay). A
// translated call carries across only what still means the same on the
// other side: the caller's beta header, toward an upstream of its own
// family, and the upstream's request id, back to the caller.

// anthropicFamily reports whether d is Anthropic's; chat and Responses
// are OpenAI's.
func anthropicFamily(d dialects.Dialect) bool { return d.Name() == dialects.NameAnthropic }

// betaHeader is the header a family's callers opt in to beta features with.
func betaHeader(d dialects.Dialect) string {
	if anthropicFamily(d) {
		return "Anthropic-Beta"
	}
	return "Openai-Beta"
}

// requestIDHeader is where a family's providers name a call.
func requestIDHeader(d dialects.Dialect) string {
	if anthropicFamily(d) {
		return "Request-Id"
	}
	return "X-Request-Id"
}

// translatedHeaders are the caller's headers h a call translated from
// dialect caller to up forwards: the caller's beta header, when up is of
// its family; nil when there is none to forward.
func translatedHeaders(h http.Header, caller, up dialects.Dialect) http.Header {
	if anthropicFamily(caller) != anthropicFamily(up) {
		return nil
	}
	name := betaHeader(caller)
	if vs := h.Values(name); len(vs) > 0 {
		return http.Header{name: vs}
	}
	return nil
}

// passRequestID sets on dst, the caller's answer's headers, the request id
// the upstream of dialect up answered with (src): under the upstream's
// name for it, and under the caller's family's, where its SDK looks.
func passRequestID(dst, src http.Header, caller, up dialects.Dialect) {
	id := src.Get(requestIDHeader(up))
	if id == "" {
		return
	}
	dst.Set(requestIDHeader(up), id)
	dst.Set(requestIDHeader(caller), id)
}
