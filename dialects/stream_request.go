package dialects

import (
	"bytes"
	"fmt"
)

// EncodeStreamRequest writes req for an upstream of dialect d, asking it
// to stream ("stream": true). A chat upstream is also asked for the
// usage (stream_options.include_usage), which it sends only when asked.
func EncodeStreamRequest(d Dialect, req Request) ([]byte, error) {
	req.Stream = false
	body, err := d.EncodeRequest(req)
	if err != nil {
		return nil, err
	}
	end := bytes.LastIndexByte(body, '}')
	if end < 1 {
		return nil, fmt.Errorf("encode %s request: not a JSON object", d.Name())
	}
	extra := `,"stream":true`
	if d.Name() == NameChat {
		extra += `,"stream_options":{"include_usage":true}`
	}
	out := make([]byte, 0, len(body)+len(extra))
	out = append(out, body[:end]...)
	out = append(out, extra...)
	return append(out, body[end:]...), nil
}
