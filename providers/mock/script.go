package mock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// scriptEntry is one line of a script file: the turns the model takes in
// the conversations whose user messages contain Match.
type scriptEntry struct {
	Match string       `json:"match"`
	Turns []scriptTurn `json:"turns"`
}

// scriptTurn is one assistant turn: tool calls, a text, or an HTTP error.
type scriptTurn struct {
	Content   string       `json:"content"`
	ToolCalls []scriptCall `json:"tool_calls"`
	// Status, when set to a non-200 code, answers with that HTTP error.
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// scriptCall is a tool call. Arguments is a JSON object, or a string taken
// as the arguments' text verbatim (to script malformed arguments).
type scriptCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// text is the arguments as the model sends them.
	text string
}

func (t scriptTurn) reply(h uint64) reply {
	r := reply{content: t.Content, status: t.Status, errMessage: t.Error}
	for k, tc := range t.ToolCalls {
		r.toolCalls = append(r.toolCalls, toolCall{id: callID(h, k), name: tc.Name, arguments: tc.text})
	}
	return r
}

// scripted returns the scripted turn for msgs: the first entry whose match
// is in a user message, at the turn numbered by the assistant messages that
// follow that user message. Past its last turn an entry repeats it.
func (m *Model) scripted(msgs []chatMessage) (scriptTurn, bool) {
	for _, e := range m.script {
		for i, msg := range msgs {
			if msg.Role != "user" || !strings.Contains(msg.text(), e.Match) {
				continue
			}
			done := 0
			for _, later := range msgs[i+1:] {
				if later.Role == "assistant" {
					done++
				}
			}
			return e.Turns[min(done, len(e.Turns)-1)], true
		}
	}
	return scriptTurn{}, false
}

// loadScript reads a script file; errors name the file and line.
func loadScript(path string) ([]scriptEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mock script: %w", err)
	}
	var entries []scriptEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		e, err := parseEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mock script %s: %w", path, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("mock script %s: %w", path, errors.New("no entries"))
	}
	return entries, nil
}

// parseEntry decodes and checks one script line, and puts every tool call's
// arguments in the form the encoders send: the arguments' JSON text.
func parseEntry(raw []byte) (scriptEntry, error) {
	var e scriptEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return scriptEntry{}, err
	}
	if dec.More() {
		return scriptEntry{}, errors.New("more than one JSON value on the line")
	}
	var present struct {
		Match *string `json:"match"`
	}
	if json.Unmarshal(raw, &present) == nil && present.Match == nil {
		return scriptEntry{}, errors.New(`no "match" ("" matches every conversation)`)
	}
	if len(e.Turns) == 0 {
		return scriptEntry{}, errors.New("no turns")
	}
	for i := range e.Turns {
		t := &e.Turns[i]
		failing := t.Status != 0 && t.Status != 200
		switch {
		case t.Status != 0 && (t.Status < 200 || t.Status > 599):
			return scriptEntry{}, fmt.Errorf("turn %d: status %d is not an HTTP status", i+1, t.Status)
		case t.Error != "" && !failing:
			return scriptEntry{}, fmt.Errorf("turn %d: error without an error status", i+1)
		case t.Content == "" && len(t.ToolCalls) == 0 && !failing:
			return scriptEntry{}, fmt.Errorf("turn %d: neither content, tool_calls nor an error status", i+1)
		}
		for k := range t.ToolCalls {
			tc := &t.ToolCalls[k]
			if tc.Name == "" {
				return scriptEntry{}, fmt.Errorf("turn %d: tool call %d has no name", i+1, k+1)
			}
			text, err := argumentsText(tc.Arguments)
			if err != nil {
				return scriptEntry{}, fmt.Errorf("turn %d: tool call %d (%s): %w", i+1, k+1, tc.Name, err)
			}
			tc.text = text
		}
	}
	return e, nil
}

// argumentsText turns a script's arguments into their JSON text: an object
// compacted, a string as it is, nothing as {}.
func argumentsText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return "{}", nil
	case raw[0] == '{':
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return "", err
		}
		return b.String(), nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	return "", errors.New("arguments must be a JSON object or a string")
}
