// Package jsonwire handles JSON as it crosses the wire between a caller,
// the interception server and a provider, where bodies are large and read
// on the caller's path:
//
//   - Shape.Check finds, in one pass over the bytes and without decoding,
//     whether a document is valid JSON that encoding/json would decode into
//     a given Go type without an error. The relay arm refuses a malformed
//     or mistyped request with it before the upstream sees it; the typed
//     decode then happens only when the trace is read.
//   - Unmarshal decodes by encoding/json's rules, faster; UnmarshalOwned
//     lets long strings and raw values of the result share the document's
//     memory.
//   - Overlay replaces or adds top-level fields of an object and keeps
//     every other byte as it came.
//
// Files: shape.go and check.go (Shape), unmarshal.go and fast.go (the
// decode), overlay.go (Overlay).
package jsonwire
