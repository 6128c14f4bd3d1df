// Package dialects holds the wire codecs the interception server speaks (OpenAI
// chat completions, OpenAI Responses, Anthropic Messages) and the typed
// vocabulary they translate through.
//
// Every dialect has the same files:
//
//	<dialect>_request.go   the dialect's route and secret carrier; reading a request, and the overlay of the relay arm
//	<dialect>_response.go  reading a non-streaming response
//	<dialect>_stream.go    reading a streamed response, and writing one for a caller
//	<dialect>_encode.go    writing a request for an upstream and a response for a caller
//	<dialect>_errors.go    the error shape: reading an upstream's, answering a caller
//	<dialect>_models.go    the model list
//
// The files they share say what they hold: dialect.go (the Dialect
// contract and the dialects by name), vocabulary.go (the typed messages,
// requests and responses), carry.go (reasoning state across dialects:
// what one dialect's state becomes in another's fields), reasoning.go
// (efforts, thinking, and what each Claude model takes), settings.go (a
// request's other settings across dialects, refused by name where the
// upstream has none), overlay.go, tool_choice.go, errors.go, sse.go,
// values.go and body.go.
//
// The JSON underneath (the request shapes' one-pass check, the decode,
// the byte-exact overlay) is package jsonwire's.
package dialects
