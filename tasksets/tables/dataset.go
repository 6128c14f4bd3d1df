// Package tables opens tasksets backed by tables: CSV and TSV files,
// Parquet files and Hugging Face datasets saved to disk (Arrow IPC
// streams), each read lazily and by index, their columns mapped to a
// task's prompt, answer and id. It is a package of its own so that what
// only needs the task type (the built-in agent) links no Arrow or Parquet.
package tables

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// Fields maps a dataset's columns to a task's parts. An empty field takes
// its default: the prompt is the column "prompt", else "question"; the
// answer is "answer" when there is one; the id is "id" when there is one,
// else the row's index.
type Fields struct {
	Prompt string
	Answer string
	ID     string
}

// The keys of a dataset ref's query: path?prompt=question&answer=label.
const (
	fieldPrompt = "prompt"
	fieldAnswer = "answer"
	fieldID     = "id"
)

// WithFields is ref with the non-empty fields of f added as its query, the
// form Open reads: data.csv?answer=label&prompt=question.
func WithFields(ref string, f Fields) string {
	q := url.Values{}
	for key, v := range map[string]string{fieldPrompt: f.Prompt, fieldAnswer: f.Answer, fieldID: f.ID} {
		if v != "" {
			q.Set(key, v)
		}
	}
	if len(q) == 0 {
		return ref
	}
	sep := "?"
	if strings.Contains(ref, "?") {
		sep = "&"
	}
	return ref + sep + q.Encode()
}

// rowSource is a table whose rows are read one at a time by index: a CSV
// file through its offset index, a Parquet file by row group, an Arrow
// dataset by record batch.
type rowSource interface {
	// rows is the number of rows.
	rows() int64
	// columns are the table's column names, in order.
	columns() []string
	// row reads row i: column name → a string, number, bool, nil, or (a
	// nested Arrow value) anything encoding/json can write.
	row(ctx context.Context, i int64) (map[string]any, error)
	io.Closer
}

// Dataset is a taskset read from a table (CSV, Parquet, or a Hugging Face
// dataset saved to disk): row i is task i, its prompt, answer and id taken
// from the columns Fields names and every other column kept in the task's
// Info. Rows are read lazily, one at a time. It is safe for concurrent use.
type Dataset struct {
	name   string
	src    rowSource
	prompt string
	answer string // "" when the dataset has no answers
	id     string // "" numbers tasks by row index
	info   []string
}

var (
	_ tasksets.Taskset = (*Dataset)(nil)
	_ io.Closer        = (*Dataset)(nil)
)

// newDataset checks f against the source's columns.
func newDataset(name string, src rowSource, f Fields) (*Dataset, error) {
	cols := src.columns()
	has := func(c string) bool { return slices.Contains(cols, c) }
	missing := func(flag, field string) error {
		return fmt.Errorf("taskset %s: no column %q for the %s (--taskset.%s-field); its columns are: %s",
			name, field, flag, flag, strings.Join(quoted(cols), ", "))
	}
	d := &Dataset{name: name, src: src}
	switch {
	case f.Prompt != "" && !has(f.Prompt):
		return nil, missing("prompt", f.Prompt)
	case f.Prompt != "":
		d.prompt = f.Prompt
	case has("prompt"):
		d.prompt = "prompt"
	case has("question"):
		d.prompt = "question"
	default:
		return nil, fmt.Errorf("taskset %s: no prompt column (looked for \"prompt\", then \"question\"; name it with --taskset.prompt-field); its columns are: %s",
			name, strings.Join(quoted(cols), ", "))
	}
	switch {
	case f.Answer != "" && !has(f.Answer):
		return nil, missing("answer", f.Answer)
	case f.Answer != "":
		d.answer = f.Answer
	case has("answer"):
		d.answer = "answer"
	}
	switch {
	case f.ID != "" && !has(f.ID):
		return nil, missing("id", f.ID)
	case f.ID != "":
		d.id = f.ID
	case has("id"):
		d.id = "id"
	}
	for _, c := range cols {
		if c != d.prompt && c != d.answer && c != d.id {
			d.info = append(d.info, c)
		}
	}
	if src.rows() == 0 {
		return nil, fmt.Errorf("taskset %s: no tasks", name)
	}
	return d, nil
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// Len is the number of rows.
func (d *Dataset) Len() int64 { return d.src.rows() }

// Task reads row i. Its errors name the row and the column, never their
// content: they reach workflow histories.
func (d *Dataset) Task(ctx context.Context, i int64) (tasksets.Task, error) {
	if i < 0 || i >= d.Len() {
		return tasksets.Task{}, fmt.Errorf("taskset %s: index %d out of range [0, %d)", d.name, i, d.Len())
	}
	row, err := d.src.row(ctx, i)
	if err != nil {
		return tasksets.Task{}, fmt.Errorf("taskset %s: row %d: %w", d.name, i, err)
	}
	t := tasksets.Task{ID: strconv.FormatInt(i, 10)}
	if t.Prompt, err = text(row[d.prompt]); err != nil || t.Prompt == "" {
		if err == nil {
			err = errors.New("empty")
		}
		return tasksets.Task{}, fmt.Errorf("taskset %s: row %d: prompt column %q: %w", d.name, i, d.prompt, err)
	}
	if d.answer != "" {
		if t.Answer, err = text(row[d.answer]); err != nil {
			return tasksets.Task{}, fmt.Errorf("taskset %s: row %d: answer column %q: %w", d.name, i, d.answer, err)
		}
	}
	if d.id != "" {
		id, err := text(row[d.id])
		if err != nil || id == "" {
			if err == nil {
				err = errors.New("empty")
			}
			return tasksets.Task{}, fmt.Errorf("taskset %s: row %d: id column %q: %w", d.name, i, d.id, err)
		}
		t.ID = id
	}
	if len(d.info) > 0 {
		info := make(map[string]any, len(d.info))
		for _, c := range d.info {
			info[c] = row[c]
		}
		if t.Info, err = json.Marshal(info); err != nil {
			return tasksets.Task{}, fmt.Errorf("taskset %s: row %d: encode the other columns: %w", d.name, i, err)
		}
	}
	return t, nil
}

// text is a cell as text: a string as it is, a number or bool as written.
func text(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case json.Number:
		return x.String(), nil
	default:
		return "", fmt.Errorf("holds %T, not text", v)
	}
}

// Close closes the underlying files.
func (d *Dataset) Close() error { return d.src.Close() }

// datasetKind says which table format a path is, or "".
func datasetKind(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return "csv"
	case ".tsv":
		return "tsv"
	case ".parquet", ".pq":
		return "parquet"
	}
	for _, marker := range []string{hfState, hfInfo, hfDict} {
		if fi, err := os.Stat(filepath.Join(path, marker)); err == nil && fi.Mode().IsRegular() {
			return "arrow"
		}
	}
	return ""
}

// Open opens ref when it names a table (ok): a CSV, TSV or Parquet file,
// or a directory a Hugging Face dataset was saved to, with an optional
// query naming its fields (path?prompt=question&answer=label). A field
// query on anything else is an error; any other ref is not ok, for
// tasksets.Open. A taskset it returns implements io.Closer.
func Open(ref string) (ts tasksets.Taskset, ok bool, err error) {
	path, query, hasQuery := strings.Cut(ref, "?")
	kind := datasetKind(path)
	if kind == "" {
		if hasQuery && looksLikeFields(query) {
			return nil, true, fmt.Errorf("taskset %s: field names (%s) apply to CSV, TSV, Parquet and Hugging Face datasets only", path, query)
		}
		return nil, false, nil
	}
	var f Fields
	if hasQuery {
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, true, fmt.Errorf("taskset %s: fields %q: %w", path, query, err)
		}
		for key := range q {
			switch key {
			case fieldPrompt, fieldAnswer, fieldID:
			default:
				return nil, true, fmt.Errorf("taskset %s: unknown parameter %q (want prompt, answer or id)", path, key)
			}
		}
		f = Fields{Prompt: q.Get(fieldPrompt), Answer: q.Get(fieldAnswer), ID: q.Get(fieldID)}
	}
	var src rowSource
	switch kind {
	case "csv", "tsv":
		src, err = openCSV(path, kind == "tsv")
	case "parquet":
		src, err = openParquet(path)
	case "arrow":
		src, err = openHFDataset(path)
	}
	if err != nil {
		return nil, true, fmt.Errorf("open taskset: %w", err)
	}
	d, err := newDataset(path, src, f)
	if err != nil {
		src.Close()
		return nil, true, err
	}
	return d, true, nil
}

// looksLikeFields reports whether a query names dataset fields.
func looksLikeFields(query string) bool {
	q, err := url.ParseQuery(query)
	if err != nil {
		return false
	}
	return q.Has(fieldPrompt) || q.Has(fieldAnswer) || q.Has(fieldID)
}
