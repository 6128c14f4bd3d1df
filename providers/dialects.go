package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/evalflow/evalflow/dialects"
)

// AnthropicVersion is the anthropic-version header sent when the caller
// did not send one.
const AnthropicVersion = "2023-06-01"

// NewResponses returns an OpenAI Responses upstream at baseURL (with /v1).
func NewResponses(baseURL, apiKey string) *Client {
	return newClient(baseURL, apiKey, dialects.NameResponses)
}

// NewAnthropic returns an Anthropic Messages upstream at baseURL (with /v1,
// e.g. https://api.anthropic.com/v1), authenticated by x-api-key.
func NewAnthropic(baseURL, apiKey string) *Client {
	return newClient(baseURL, apiKey, dialects.NameAnthropic)
}

// New returns the upstream of the named dialect ("" is chat).
func New(dialect, baseURL, apiKey string) (*Client, error) {
	d, err := dialects.ByName(dialect)
	if err != nil {
		return nil, err
	}
	return newClient(baseURL, apiKey, d.Name()), nil
}

// Dialect is the wire format the upstream speaks.
func (o *Client) Dialect() string {
	if o.dialect == "" {
		return dialects.NameChat
	}
	return o.dialect
}

// auth sets the upstream's credentials in its dialect's carrier.
func (o *Client) auth(h http.Header) {
	if o.Dialect() == dialects.NameAnthropic {
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", AnthropicVersion)
		}
		if o.apiKey != "" {
			h.Set("X-Api-Key", o.apiKey)
		}
		return
	}
	if o.apiKey != "" {
		h.Set("Authorization", "Bearer "+o.apiKey)
	}
}

// dropped are the caller headers never forwarded: credentials (replaced by
// the upstream's), hop-by-hop ones (RFC 9110, 7.6.1), and the ones the
// transport sets itself.
var dropped = map[string]bool{
	"Authorization": true, "X-Api-Key": true, "Api-Key": true, "Cookie": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Content-Type": true, "Accept-Encoding": true,
}

// forwardHeaders copies the caller's headers into dst, one value per name
// (repeated values joined by commas), minus dropped ones and the ones
// listed by Connection.
func forwardHeaders(dst, src http.Header) {
	conn := map[string]bool{}
	for _, v := range src.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			conn[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	for k, vs := range src {
		ck := http.CanonicalHeaderKey(k)
		if dropped[ck] || conn[ck] || len(vs) == 0 {
			continue
		}
		dst.Set(ck, strings.Join(vs, ", "))
	}
}

// ErrContextLength marks an upstream error saying the prompt does not fit the
// model's context: a task error, never worth retrying.
var ErrContextLength = errors.New("context length exceeded")

// StatusError is a non-2xx answer of a typed Call.
type StatusError struct {
	Status int
	Err    error
}

// Error implements error.
func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap returns the dialect's error, and ErrContextLength when it says so.
func (e *StatusError) Unwrap() []error {
	if IsContextLength(e.Err.Error()) {
		return []error{e.Err, ErrContextLength}
	}
	return []error{e.Err}
}

// contextLengthSignals are how providers word a context overflow.
var contextLengthSignals = []string{
	"context_length_exceeded", "context length", "context window", "maximum context",
	"prompt is too long", "input is too long", "too many tokens", "model_context_window_exceeded",
}

// IsContextLength reports whether an upstream error message says the prompt
// overflowed the model's context.
func IsContextLength(message string) bool {
	m := strings.ToLower(message)
	for _, s := range contextLengthSignals {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// Call sends req in the upstream's dialect, without streaming, and reads
// the typed answer. A non-2xx answer is a *StatusError.
func (o *Client) Call(ctx context.Context, req dialects.Request) (dialects.Response, error) {
	d, err := dialects.ByName(o.Dialect())
	if err != nil {
		return dialects.Response{}, err
	}
	body, err := d.EncodeRequest(req)
	if err != nil {
		return dialects.Response{}, err
	}
	resp, _, err := o.Do(ctx, d.Path(), body)
	if err != nil {
		return dialects.Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return dialects.Response{}, fmt.Errorf("%s: read response: %w", d.Name(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return dialects.Response{}, &StatusError{Status: resp.StatusCode, Err: d.ParseError(resp.StatusCode, data)}
	}
	return d.ParseResponse(data)
}
