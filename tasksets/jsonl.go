package tasksets

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// JSONL is a taskset read lazily from a JSON Lines source: opening scans it
// once, validating every line and keeping only line offsets; Task reads just
// the line it needs. It is safe for concurrent use.
type JSONL struct {
	name string
	// dir is what relative paths in tasks are relative to: the file's
	// directory; "" is the working directory.
	dir    string
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
// unique. Errors name the file, the line and, for malformed JSON, the byte
// offset in the line, as in "tasks.jsonl:17: offset 9: invalid JSON: expected
// a value"; they never quote the file's content, since they end up in
// workflow histories. Only a regular file is read: a FIFO, a device or a
// socket is refused before it is read, so none can block a worker. The caller
// must Close it.
func OpenFile(path string) (*JSONL, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open taskset: %w", err)
	}
	ts, err := newJSONL(path, dir, f, st.Size())
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
	return newJSONL(name, "", r, size)
}

func newJSONL(name, dir string, r io.ReaderAt, size int64) (*JSONL, error) {
	ts := &JSONL{name: name, dir: dir, r: r}
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
			t, err := decodeTask(raw, dir)
			if err == nil {
				err = checkTaskDirs(t)
			}
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, lineNo, err)
			}
			if first, dup := firstLine[t.ID]; dup {
				// The id itself is content: the line numbers locate it.
				return nil, fmt.Errorf("%s:%d: duplicate id (first on line %d)", name, lineNo, first)
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
	if len(bytes.TrimSpace(buf)) == 0 {
		return Task{}, fmt.Errorf("%s:%d: the line is blank now; the file changed after it was opened", j.name, s.line)
	}
	t, err := decodeTask(buf, j.dir)
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

	// A task with a workspace: directories relative to the file's.
	Environment        string            `json:"environment"`
	Tests              string            `json:"tests"`
	Verify             string            `json:"verify"`
	Solution           string            `json:"solution"`
	AgentTimeoutSec    *float64          `json:"agent_timeout_sec"`
	VerifierTimeoutSec *float64          `json:"verifier_timeout_sec"`
	VerifierEnv        map[string]string `json:"verifier_env"`

	Tools []ToolServer `json:"tools"`
	User  *User        `json:"user"`
}

// decodeTask validates and decodes one non-blank line, raw as read (with its
// surrounding space). Its errors describe the problem and where it is, never
// the line's bytes: a file that is not a taskset at all must not leak into a
// workflow history through them.
//
// Relative paths (environment, tests, solution) are resolved against dir.
func decodeTask(raw []byte, dir string) (Task, error) {
	line := bytes.TrimSpace(raw)
	lead := len(raw) - len(bytes.TrimLeftFunc(raw, unicode.IsSpace))
	if line[0] != '{' {
		return Task{}, fmt.Errorf("offset %d: not a JSON object", lead)
	}
	if !json.Valid(line) {
		var v any
		return Task{}, syntaxError(json.Unmarshal(line, &v), lead, len(line))
	}
	var tl taskLine
	if err := json.Unmarshal(line, &tl); err != nil {
		return Task{}, typeError(err)
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
	if tl.Tests != "" && tl.Verify == "" {
		return Task{}, errors.New(`"tests" needs a "verify" command to run them`)
	}
	t.Verify = tl.Verify
	if err := checkTools(tl.Tools, tl.User); err != nil {
		return Task{}, err
	}
	t.Tools, t.User = tl.Tools, tl.User
	t.VerifierEnv = tl.VerifierEnv
	if len(t.VerifierEnv) == 0 {
		t.VerifierEnv = nil
	}
	for _, p := range []struct {
		src string
		dst *string
	}{{tl.Environment, &t.Environment}, {tl.Tests, &t.Tests}, {tl.Solution, &t.Solution}} {
		if p.src == "" {
			continue
		}
		path := p.src
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return Task{}, err
		}
		*p.dst = abs
	}
	for _, s := range []struct {
		sec  *float64
		dst  *time.Duration
		name string
	}{{tl.AgentTimeoutSec, &t.AgentTimeout, `"agent_timeout_sec"`}, {tl.VerifierTimeoutSec, &t.VerifierTimeout, `"verifier_timeout_sec"`}} {
		if s.sec == nil {
			continue
		}
		d, err := seconds(*s.sec, s.name)
		if err != nil {
			return Task{}, err
		}
		*s.dst = d
	}
	return t, nil
}

// checkTaskDirs checks that the directories a task names are directories.
// Its errors name the field, never the path (content of the file).
func checkTaskDirs(t Task) error {
	for _, d := range []struct{ path, field string }{
		{t.Environment, "environment"}, {t.Tests, "tests"}, {t.Solution, "solution"},
	} {
		if d.path == "" {
			continue
		}
		fi, err := os.Stat(d.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%q: no such directory", d.field)
		case err != nil:
			return fmt.Errorf("%q: %w", d.field, fileProblem(d.path, err))
		case !fi.IsDir():
			return fmt.Errorf("%q is %s, not a directory", d.field, DescribeMode(fi.Mode()))
		}
	}
	return nil
}

// syntaxExpectations says what the JSON scanner expected, by the end of its
// message (the part after the character it quotes, which is never reused);
// the first match wins, so longer endings come first.
var syntaxExpectations = []struct{ suffix, expected string }{
	{"looking for beginning of value", "expected a value"},
	{"looking for beginning of object key string", "expected a string key or '}'"},
	{"after object key", "expected ':' after a key"},
	{"after object key:value pair", "expected ',' or '}' after a value"},
	{"after array element", "expected ',' or ']' after an element"},
	{"after top-level value", "expected the end of the line after the object"},
	{"in string literal", "expected a character allowed in a string (control characters must be escaped)"},
	{"in string escape code", "expected an escape such as \\n or \\\" in a string"},
	{"in \\u hexadecimal character escape", "expected four hex digits after \\u"},
	{"after decimal point in numeric literal", "expected a digit after a decimal point"},
	{"in exponent of numeric literal", "expected a digit in an exponent"},
	{"in numeric literal", "expected a digit in a number"},
}

// syntaxError describes err, from decoding a line of n bytes (lead bytes of
// space before it), by its offset in the line and what was expected there.
func syntaxError(err error, lead, n int) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return errors.New("invalid JSON")
	}
	msg := se.Error()
	if strings.HasPrefix(msg, "unexpected end of JSON input") {
		return fmt.Errorf("offset %d: invalid JSON: the line ends inside a value", lead+n)
	}
	// The scanner counts the offending byte as read.
	off := lead + int(se.Offset) - 1
	expected := "unexpected character"
	for _, e := range syntaxExpectations {
		if strings.HasSuffix(msg, " "+e.suffix) {
			expected = e.expected
			break
		}
	}
	if strings.Contains(msg, " in literal ") {
		expected = "expected true, false or null"
	}
	return fmt.Errorf("offset %d: invalid JSON: %s", off, expected)
}

// typeError describes an error decoding valid JSON into a taskLine by the
// field and the type it wants, without the value found there.
func typeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" || te.Type == nil {
		return errors.New("invalid task")
	}
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int64:
		want = "a number"
	}
	// Value is the JSON type found, followed by the number itself for some
	// numbers: only the type is kept.
	found, _, _ := strings.Cut(te.Value, " ")
	switch found {
	case "array", "object":
		found = "an " + found
	case "bool":
		found = "a boolean"
	case "number", "string":
		found = "a " + found
	default:
		return fmt.Errorf("invalid task: %q must be %s", te.Field, want)
	}
	return fmt.Errorf("invalid task: %q must be %s, not %s", te.Field, want, found)
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
