package tasksets

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// JSONL is a taskset read lazily from a JSON Lines source: opening scans it
// once, validating every line and keeping only line offsets; Task reads just
// the line it needs. It is safe for concurrent use.
type JSONL struct {
	name   string
	r      io.ReaderAt
	closer io.Closer
	lines  []span
}

// span locates one task line.
type span struct {
	off  int64
	n    int32
	line int32 // 1-based, for error messages
}

var (
	_ Taskset   = (*JSONL)(nil)
	_ io.Closer = (*JSONL)(nil)
)

// OpenFile opens a JSONL task file. Each non-blank line must be a JSON object
// with an "id" (string or number) and a "prompt" or "messages"; ids must be
// unique. Errors name the file and line, as in "tasks.jsonl:17: invalid JSON".
// The caller must Close it.
func OpenFile(path string) (*JSONL, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	ts, err := NewJSONL(path, f, st.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	ts.closer = f
	return ts, nil
}

// NewJSONL indexes size bytes of JSONL read from r; name is used in error
// messages. Closing the result does not close r.
func NewJSONL(name string, r io.ReaderAt, size int64) (*JSONL, error) {
	ts := &JSONL{name: name, r: r}
	firstLine := map[string]int32{}
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10)
	var off int64
	for lineNo := int32(1); ; lineNo++ {
		raw, readErr := br.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return nil, fmt.Errorf("%s:%d: read: %w", name, lineNo, readErr)
		}
		start := off
		off += int64(len(raw))
		if line := bytes.TrimSpace(raw); len(line) > 0 {
			t, err := decodeTask(line)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, lineNo, err)
			}
			if first, dup := firstLine[t.ID]; dup {
				return nil, fmt.Errorf("%s:%d: duplicate id %q (first on line %d)", name, lineNo, t.ID, first)
			}
			firstLine[t.ID] = lineNo
			ts.lines = append(ts.lines, span{off: start, n: int32(len(raw)), line: lineNo})
		}
		if readErr != nil {
			break
		}
	}
	if len(ts.lines) == 0 {
		return nil, fmt.Errorf("%s: no tasks", name)
	}
	return ts, nil
}

// Len is the number of tasks.
func (j *JSONL) Len() int64 { return int64(len(j.lines)) }

// Task reads and decodes line i.
func (j *JSONL) Task(ctx context.Context, i int64) (Task, error) {
	if err := ctx.Err(); err != nil {
		return Task{}, err
	}
	if i < 0 || i >= int64(len(j.lines)) {
		return Task{}, fmt.Errorf("%s: task %d out of range [0, %d)", j.name, i, len(j.lines))
	}
	s := j.lines[i]
	buf := make([]byte, s.n)
	// ReadAt may report io.EOF along with a full buffer at the end of the file.
	if n, err := j.r.ReadAt(buf, s.off); n < len(buf) {
		return Task{}, fmt.Errorf("%s:%d: read: %w", j.name, s.line, err)
	}
	t, err := decodeTask(bytes.TrimSpace(buf))
	if err != nil {
		// The file changed after it was opened.
		return Task{}, fmt.Errorf("%s:%d: %w", j.name, s.line, err)
	}
	return t, nil
}

// Close closes the underlying file, if OpenFile opened one.
func (j *JSONL) Close() error {
	if j.closer == nil {
		return nil
	}
	return j.closer.Close()
}

// taskLine is a task as written in JSONL, before ids and answers that are
// numbers become strings.
type taskLine struct {
	ID       json.RawMessage `json:"id"`
	Prompt   string          `json:"prompt"`
	Messages []Message       `json:"messages"`
	Answer   json.RawMessage `json:"answer"`
	Info     json.RawMessage `json:"info"`
}

// decodeTask validates and decodes one trimmed, non-empty line.
func decodeTask(line []byte) (Task, error) {
	if !json.Valid(line) {
		var v any
		err := json.Unmarshal(line, &v)
		return Task{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if line[0] != '{' {
		return Task{}, errors.New("not a JSON object")
	}
	var tl taskLine
	if err := json.Unmarshal(line, &tl); err != nil {
		return Task{}, fmt.Errorf("invalid task: %w", err)
	}
	id, err := scalarString(tl.ID)
	if err != nil || id == "" {
		return Task{}, errors.New(`"id" must be a non-empty string or a number`)
	}
	if tl.Prompt == "" && len(tl.Messages) == 0 {
		return Task{}, errors.New(`task has neither "prompt" nor "messages"`)
	}
	for k, m := range tl.Messages {
		if m.Role == "" {
			return Task{}, fmt.Errorf(`messages[%d] has no "role"`, k)
		}
	}
	answer, err := scalarString(tl.Answer)
	if err != nil {
		return Task{}, errors.New(`"answer" must be a string or a number`)
	}
	t := Task{ID: id, Prompt: tl.Prompt, Messages: tl.Messages, Answer: answer}
	if len(tl.Info) > 0 && !bytes.Equal(tl.Info, []byte("null")) {
		t.Info = tl.Info
	}
	return t, nil
}

// scalarString reads a JSON string or number as a string; absent or null is "".
func scalarString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", err
	}
	return n.String(), nil
}
