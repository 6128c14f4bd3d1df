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

// scriptLine is one canned response of a script file. A script is JSONL:
//
//	{"match":"capital of France","content":"Paris."}
//	{"match":"weather","tool_calls":[{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}]}
//	{"match":"flaky","status":503,"error":"upstream overloaded"}
//
// The first line whose match is a substring of the last user message wins;
// an empty match matches everything. Unmatched requests get the built-in
// behaviour.
type scriptLine struct {
	Match     string `json:"match"`
	Content   string `json:"content"`
	ToolCalls []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
	// Status, when set to a non-200 code, answers with that HTTP error.
	Status int    `json:"status"`
	Error  string `json:"error"`
}

func (l scriptLine) reply(h uint64) reply {
	r := reply{content: l.Content, status: l.Status, errMessage: l.Error}
	for k, tc := range l.ToolCalls {
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		r.toolCalls = append(r.toolCalls, toolCall{id: callID(h, k), name: tc.Name, arguments: args})
	}
	return r
}

func (m *Model) match(lastUser string) (scriptLine, bool) {
	for _, l := range m.script {
		if strings.Contains(lastUser, l.Match) {
			return l, true
		}
	}
	return scriptLine{}, false
}

// loadScript reads a script file; errors name the file and line.
func loadScript(path string) ([]scriptLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mock script: %w", err)
	}
	var lines []scriptLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l scriptLine
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if l.Status != 0 && (l.Status < 200 || l.Status > 599) {
			return nil, fmt.Errorf("%s:%d: status %d is not an HTTP status", path, n, l.Status)
		}
		for _, tc := range l.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("%s:%d: tool call without a name", path, n)
			}
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mock script %s: %w", path, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("mock script %s: %w", path, errors.New("no lines"))
	}
	return lines, nil
}
