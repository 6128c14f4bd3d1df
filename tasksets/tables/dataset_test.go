package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/evalflow/evalflow/tasksets"
)

// fixtureRow is one row of every fixture: a math question with its answer.
type fixtureRow struct {
	ID       string `parquet:"id"`
	Question string `parquet:"question"`
	Answer   string `parquet:"answer"`
	Level    int64  `parquet:"level"`
}

func fixtureRows(n int) []fixtureRow {
	rows := make([]fixtureRow, n)
	for i := range rows {
		rows[i] = fixtureRow{
			ID:       fmt.Sprintf("q-%03d", i),
			Question: fmt.Sprintf("What is %d + %d?", i, 2*i),
			Answer:   strconv.Itoa(3 * i),
			Level:    int64(i % 4),
		}
	}
	// Text a CSV must quote: a comma, a quote and a line break.
	rows[1].Question = "Add 1, then 2.\nWhat is \"the\" sum?"
	return rows
}

// wantTask is the task row r makes with the fields id, question, answer;
// a CSV's cells are all text.
func wantTask(t *testing.T, r fixtureRow, text bool) tasksets.Task {
	var level any = r.Level
	if text {
		level = strconv.FormatInt(r.Level, 10)
	}
	info, err := json.Marshal(map[string]any{"level": level})
	require.NoError(t, err)
	return tasksets.Task{ID: r.ID, Prompt: r.Question, Answer: r.Answer, Info: info}
}

// checkEveryRow asserts that task i is row i, reading them out of order.
func checkEveryRow(t *testing.T, ts tasksets.Taskset, rows []fixtureRow) {
	t.Helper()
	checkRows(t, ts, rows, false)
}

// checkEveryCSVRow is checkEveryRow for a CSV or TSV file.
func checkEveryCSVRow(t *testing.T, ts tasksets.Taskset, rows []fixtureRow) {
	t.Helper()
	checkRows(t, ts, rows, true)
}

func checkRows(t *testing.T, ts tasksets.Taskset, rows []fixtureRow, text bool) {
	t.Helper()
	require.Equal(t, int64(len(rows)), ts.Len())
	for _, i := range append([]int{len(rows) - 1, 0}, perm(len(rows))...) {
		got, err := ts.Task(context.Background(), int64(i))
		require.NoError(t, err, "Task(%d)", i)
		want := wantTask(t, rows[i], text)
		assert.Equal(t, want.ID, got.ID, "Task(%d).ID", i)
		assert.Equal(t, want.Prompt, got.Prompt, "Task(%d).Prompt", i)
		assert.Equal(t, want.Answer, got.Answer, "Task(%d).Answer", i)
		assert.JSONEq(t, string(want.Info), string(got.Info), "Task(%d).Info", i)
	}
	_, err := ts.Task(context.Background(), int64(len(rows)))
	assert.ErrorContains(t, err, "out of range")
}

// perm is 0..n-1 in a fixed scrambled order.
func perm(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i*7 + 3) % n
	}
	return out
}

func writeCSV(t *testing.T, name string, rows []fixtureRow) string {
	t.Helper()
	text := "\uFEFFid,question,answer,level\n"
	for _, r := range rows {
		text += fmt.Sprintf("%s,%s,%s,%d\n", r.ID, strconv.Quote(r.Question), r.Answer, r.Level)
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(csvQuotes(text)), 0o600))
	return path
}

// csvQuotes turns Go's \" and \n escapes of strconv.Quote into CSV's.
func csvQuotes(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '"':
				out = append(out, '"', '"')
				i++
				continue
			case 'n':
				out = append(out, '\n')
				i++
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}

func writeParquet(t *testing.T, rows []fixtureRow, perGroup int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.parquet")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := parquet.NewGenericWriter[fixtureRow](f, parquet.MaxRowsPerRowGroup(perGroup))
	_, err = w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, f.Close())
	return path
}

// writeHFDataset writes rows as save_to_disk does: Arrow IPC stream files
// data-0000k-of-0000N.arrow, batchRows rows a record batch, with
// dataset_info.json and state.json.
func writeHFDataset(t *testing.T, rows []fixtureRow, shards, batchRows int) string {
	t.Helper()
	dir := t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "question", Type: arrow.BinaryTypes.LargeString},
		{Name: "answer", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "level", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	per := (len(rows) + shards - 1) / shards
	var files []map[string]string
	for k := range shards {
		name := fmt.Sprintf("data-%05d-of-%05d.arrow", k, shards)
		files = append(files, map[string]string{"filename": name})
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(t, err)
		w := ipc.NewWriter(f, ipc.WithSchema(schema))
		shard := rows[k*per : min((k+1)*per, len(rows))]
		for start := 0; start < len(shard); start += batchRows {
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for _, r := range shard[start:min(start+batchRows, len(shard))] {
				b.Field(0).(*array.StringBuilder).Append(r.ID)
				b.Field(1).(*array.LargeStringBuilder).Append(r.Question)
				b.Field(2).(*array.StringBuilder).Append(r.Answer)
				b.Field(3).(*array.Int64Builder).Append(r.Level)
			}
			rec := b.NewRecord()
			require.NoError(t, w.Write(rec))
			rec.Release()
			b.Release()
		}
		require.NoError(t, w.Close())
		require.NoError(t, f.Close())
	}
	state, err := json.Marshal(map[string]any{"_data_files": files, "_fingerprint": "f00d", "_format_type": nil, "_split": "train"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, hfState), state, 0o600))
	info := `{"features": {"id": {"dtype": "string", "_type": "Value"}, "question": {"dtype": "large_string", "_type": "Value"}, "answer": {"dtype": "string", "_type": "Value"}, "level": {"dtype": "int64", "_type": "Value"}}, "splits": {"train": {"name": "train", "num_examples": ` + strconv.Itoa(len(rows)) + `}}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, hfInfo), []byte(info), 0o600))
	return dir
}

func open(t *testing.T, ref string) tasksets.Taskset {
	t.Helper()
	ts, ok, err := Open(ref)
	require.NoError(t, err, "Open(%q)", ref)
	require.True(t, ok, "Open(%q) is a table", ref)
	t.Cleanup(func() { assert.NoError(t, ts.(*Dataset).Close()) })
	return ts
}

func TestCSVTaskset(t *testing.T) {
	rows := fixtureRows(23)
	path := writeCSV(t, "tasks.csv", rows)
	// "question" is the prompt when there is no "prompt" column.
	checkEveryCSVRow(t, open(t, path), rows)
	checkEveryCSVRow(t, open(t, path+"?prompt=question&answer=answer&id=id"), rows)
}

func TestTSVTaskset(t *testing.T) {
	rows := fixtureRows(5)
	rows[1].Question = "Add 1, then 2."
	text := "id\tquestion\tanswer\tlevel\n"
	for _, r := range rows {
		text += fmt.Sprintf("%s\t%s\t%s\t%d\n", r.ID, r.Question, r.Answer, r.Level)
	}
	path := filepath.Join(t.TempDir(), "tasks.tsv")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	checkEveryCSVRow(t, open(t, path), rows)
}

func TestCSVRecordErrorsNameTheRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.csv")
	require.NoError(t, os.WriteFile(path, []byte("question,answer\nsecret one,1\nsecret two\n"), 0o600))
	_, _, err := Open(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "record 2: line 3")
	assert.Contains(t, err.Error(), "wrong number of fields")
	assert.NotContains(t, err.Error(), "secret", "the content is never quoted")
}

func TestParquetTaskset(t *testing.T) {
	rows := fixtureRows(40)
	path := writeParquet(t, rows, 7)
	f, err := os.Open(path)
	require.NoError(t, err)
	st, err := f.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(f, st.Size())
	require.NoError(t, err)
	require.Len(t, pf.RowGroups(), 6, "the fixture has several row groups")
	require.NoError(t, f.Close())

	checkEveryRow(t, open(t, path+"?prompt=question"), rows)
}

func TestHFDatasetTaskset(t *testing.T) {
	rows := fixtureRows(31)
	dir := writeHFDataset(t, rows, 2, 4) // 2 shards of 4 batches each
	src, err := openHFDataset(dir)
	require.NoError(t, err)
	assert.Len(t, src.batches, 8, "every record batch is indexed")
	require.NoError(t, src.Close())

	checkEveryRow(t, open(t, dir), rows)
	checkEveryRow(t, open(t, dir+"?prompt=question&answer=answer"), rows)
}

func TestHFDatasetWithoutState(t *testing.T) {
	rows := fixtureRows(9)
	dir := writeHFDataset(t, rows, 3, 2)
	require.NoError(t, os.Remove(filepath.Join(dir, hfState)))
	checkEveryRow(t, open(t, dir), rows)
}

func TestHFDatasetDictNeedsASplit(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, hfDict), []byte(`{"splits": ["train", "test"]}`), 0o600))
	_, _, err := Open(dir)
	assert.ErrorContains(t, err, "holds a DatasetDict: name one of its splits' directories (train, test)")
}

// A field that is not a column names the field and the columns there are.
func TestDatasetMissingField(t *testing.T) {
	rows := fixtureRows(3)
	for _, tc := range []struct {
		kind, ref string
	}{
		{"csv", writeCSV(t, "t.csv", rows)},
		{"parquet", writeParquet(t, rows, 2)},
		{"arrow", writeHFDataset(t, rows, 1, 2)},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			_, _, err := Open(tc.ref + "?prompt=problem")
			require.Error(t, err)
			assert.Contains(t, err.Error(), `no column "problem" for the prompt (--taskset.prompt-field); its columns are: "id", "question", "answer", "level"`)
			_, _, err = Open(tc.ref + "?answer=solution")
			assert.ErrorContains(t, err, `no column "solution" for the answer (--taskset.answer-field)`)
			_, _, err = Open(tc.ref + "?id=uid")
			assert.ErrorContains(t, err, `no column "uid" for the id (--taskset.id-field)`)
		})
	}
}

func TestDatasetDefaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain.csv")
	require.NoError(t, os.WriteFile(path, []byte("prompt,question,notes\nSay hi.,unused,x\nSay bye.,unused,y\n"), 0o600))
	ts := open(t, path)
	task, err := ts.Task(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, tasksets.Task{ID: "1", Prompt: "Say bye.", Info: json.RawMessage(`{"notes":"y","question":"unused"}`)}, task,
		"prompt before question; no answer column; the index as id")

	path = filepath.Join(t.TempDir(), "none.csv")
	require.NoError(t, os.WriteFile(path, []byte("text,label\na,b\n"), 0o600))
	_, _, err = Open(path)
	assert.ErrorContains(t, err, `no prompt column (looked for "prompt", then "question"; name it with --taskset.prompt-field); its columns are: "text", "label"`)
	ts = open(t, path+"?prompt=text&answer=label")
	task, err = ts.Task(context.Background(), 0)
	require.NoError(t, err)
	assert.Equal(t, tasksets.Task{ID: "0", Prompt: "a", Answer: "b"}, task)
}

func TestDatasetEmptyPromptIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gap.csv")
	require.NoError(t, os.WriteFile(path, []byte("question,answer\nfine,1\n,2\n"), 0o600))
	ts := open(t, path)
	_, err := ts.Task(context.Background(), 1)
	assert.ErrorContains(t, err, `row 1: prompt column "question": empty`)
}

func TestDatasetRefs(t *testing.T) {
	assert.Equal(t, "d.csv", WithFields("d.csv", Fields{}))
	assert.Equal(t, "d.csv?answer=label&prompt=q+text", WithFields("d.csv", Fields{Prompt: "q text", Answer: "label"}))

	_, _, err := Open(writeCSV(t, "t.csv", fixtureRows(2)) + "?promt=question")
	assert.ErrorContains(t, err, `unknown parameter "promt"`)
	jsonl := filepath.Join(t.TempDir(), "t.jsonl")
	require.NoError(t, os.WriteFile(jsonl, []byte(`{"id":"1","prompt":"p"}`+"\n"), 0o600))
	_, _, err = Open(jsonl + "?prompt=question")
	assert.ErrorContains(t, err, "apply to CSV, TSV, Parquet and Hugging Face datasets only")
}

func TestDatasetsServeConcurrentReaders(t *testing.T) {
	rows := fixtureRows(24)
	for _, ref := range []string{writeCSV(t, "c.csv", rows), writeParquet(t, rows, 5), writeHFDataset(t, rows, 2, 3)} {
		ts := open(t, ref)
		errs := make(chan error, len(rows))
		for i := range rows {
			go func() {
				task, err := ts.Task(context.Background(), int64(i))
				if err == nil && task.ID != rows[i].ID {
					err = fmt.Errorf("Task(%d).ID = %q, want %q", i, task.ID, rows[i].ID)
				}
				errs <- err
			}()
		}
		for range rows {
			assert.NoError(t, <-errs, ref)
		}
	}
}
