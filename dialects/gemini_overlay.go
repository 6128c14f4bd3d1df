package dialects

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/evalflow/evalflow/internal/jsonwire"
)

// geminiOverlay checks body against the request's shape and sets the
// sampling of s inside generationConfig, keeping every other byte: a
// field there is replaced where it is, a missing one added at the
// object's end, and a missing generationConfig added at the body's.
func geminiOverlay(body []byte, s Sampling) (Body, error) {
	if err := geminiRequestShape.Check(body); err != nil {
		return nil, err
	}
	fields := geminiSamplingFields(s)
	if len(fields) == 0 {
		return Body{body}, nil
	}
	ms, err := jsonwire.Members(body, 0)
	if err != nil {
		return nil, err
	}
	var edits []jsonwire.Edit
	found := false
	for _, m := range ms {
		if !strings.EqualFold(m.Key, "generationConfig") {
			continue
		}
		found = true
		e, err := overlayObject(body, m.Value, fields)
		if err != nil {
			return nil, err
		}
		edits = append(edits, e...)
	}
	if !found {
		return jsonwire.Overlay(body, geminiRequestShape, func(func(string) bool) []jsonwire.Field {
			return []jsonwire.Field{{Key: "generationConfig", Value: orderedObject(fields)}}
		})
	}
	slices.SortFunc(edits, func(a, b jsonwire.Edit) int { return a.Start - b.Start })
	out := Body{}
	pos := 0
	for _, e := range edits {
		out = append(out, body[pos:e.Start], e.Text)
		pos = e.End
	}
	return append(out, body[pos:]), nil
}

// geminiSamplingFields are the generationConfig fields s sets.
func geminiSamplingFields(s Sampling) []jsonwire.Field {
	var fs []jsonwire.Field
	if s.Temperature != nil {
		fs = append(fs, jsonwire.Field{Key: "temperature", Value: *s.Temperature})
	}
	if s.TopP != nil {
		fs = append(fs, jsonwire.Field{Key: "topP", Value: *s.TopP})
	}
	if s.MaxTokens != nil {
		fs = append(fs, jsonwire.Field{Key: "maxOutputTokens", Value: *s.MaxTokens})
	}
	if s.Seed != nil {
		fs = append(fs, jsonwire.Field{Key: "seed", Value: *s.Seed})
	}
	return fs
}

// overlayObject is the edits that set fields in the object (or null) at
// span v of body.
func overlayObject(body []byte, v jsonwire.Span, fields []jsonwire.Field) ([]jsonwire.Edit, error) {
	if body[v.Start] != '{' { // null
		return []jsonwire.Edit{{Span: v, Text: orderedObject(fields)}}, nil
	}
	inner, err := jsonwire.Members(body, v.Start)
	if err != nil {
		return nil, err
	}
	var edits []jsonwire.Edit
	var added []byte
	for _, f := range fields {
		value := mustJSON(f.Value)
		seen := false
		for _, m := range inner {
			if strings.EqualFold(m.Key, f.Key) {
				edits = append(edits, jsonwire.Edit{Span: m.Value, Text: value})
				seen = true
			}
		}
		if !seen {
			if len(inner) > 0 || len(added) > 0 {
				added = append(added, ',')
			}
			added = append(append(append(added, mustJSON(f.Key)...), ':'), value...)
		}
	}
	if len(added) > 0 {
		end := v.End - 1 // the closing brace
		edits = append(edits, jsonwire.Edit{Span: jsonwire.Span{Start: end, End: end}, Text: added})
	}
	return edits, nil
}

// orderedObject is fields as one JSON object, in their order.
func orderedObject(fields []jsonwire.Field) json.RawMessage {
	b := []byte{'{'}
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, mustJSON(f.Key)...), ':'), mustJSON(f.Value)...)
	}
	return append(b, '}')
}
