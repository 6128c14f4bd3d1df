package tables

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/evalflow/evalflow/tasksets"
)

// The files of a Hugging Face dataset saved with save_to_disk.
const (
	hfState = "state.json"        // lists the data files, in order
	hfInfo  = "dataset_info.json" // features, description
	hfDict  = "dataset_dict.json" // a DatasetDict: one directory per split
)

// hfSource is a Hugging Face dataset saved to disk: Arrow IPC stream files
// (data-00000-of-0000N.arrow) read by record batch. Opening reads each
// file once to find where its messages lie; a row is read by decoding only
// the batch holding it (after the stream's schema and dictionaries).
type hfSource struct {
	files   []*os.File
	names   []string
	batches []arrowBatch
	// starts[b] is batch b's first row; starts[len] the row count.
	starts []int64
}

// arrowBatch locates one record batch and what decoding it needs.
type arrowBatch struct {
	file   int
	schema section
	dicts  []section
	batch  section
	rows   int64
}

type section struct{ off, n int64 }

// hfStateFile is what state.json says of the data files.
type hfStateFile struct {
	DataFiles []struct {
		Filename string `json:"filename"`
	} `json:"_data_files"`
}

func openHFDataset(dir string) (*hfSource, error) {
	if b, err := os.ReadFile(filepath.Join(dir, hfDict)); err == nil {
		var dict struct {
			Splits []string `json:"splits"`
		}
		_ = json.Unmarshal(b, &dict)
		return nil, fmt.Errorf("%s holds a DatasetDict: name one of its splits' directories (%s)", dir, strings.Join(dict.Splits, ", "))
	}
	files, err := hfDataFiles(dir)
	if err != nil {
		return nil, err
	}
	s := &hfSource{}
	for k, name := range files {
		f, err := tasksets.OpenRegular(filepath.Join(dir, name))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.files = append(s.files, f)
		if err := s.index(k); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
	}
	s.starts = append(s.starts, s.total())
	return s, nil
}

// hfDataFiles are the dataset's Arrow files in order: state.json's list,
// else every data-*.arrow by name.
func hfDataFiles(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, hfState))
	if err == nil {
		var st hfStateFile
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, hfState), err)
		}
		var names []string
		for _, f := range st.DataFiles {
			if f.Filename == "" || filepath.Base(f.Filename) != f.Filename {
				return nil, fmt.Errorf("%s: data file %q is not a file of the directory", filepath.Join(dir, hfState), f.Filename)
			}
			names = append(names, f.Filename)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s lists no data files", filepath.Join(dir, hfState))
		}
		return names, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	matches, err := filepath.Glob(filepath.Join(dir, "data-*.arrow"))
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("%s: no %s and no data-*.arrow files", dir, hfState)
	}
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = filepath.Base(m)
	}
	slices.Sort(names)
	return names, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// locatingMessages is a MessageReader that notes where the messages of a
// stream lie: its schema, its dictionaries so far, its last record batch.
type locatingMessages struct {
	ipc.MessageReader
	in     *countingReader
	schema section
	dicts  []section
	batch  section
}

func (m *locatingMessages) Message() (*ipc.Message, error) {
	start := m.in.n
	msg, err := m.MessageReader.Message()
	if msg == nil {
		return msg, err
	}
	sec := section{off: start, n: m.in.n - start}
	switch msg.Type() {
	case ipc.MessageSchema:
		m.schema = sec
	case ipc.MessageDictionaryBatch:
		m.dicts = append(m.dicts, sec)
	case ipc.MessageRecordBatch:
		m.batch = sec
	}
	return msg, err
}

// total is the rows of the batches indexed so far.
func (s *hfSource) total() int64 {
	if len(s.batches) == 0 {
		return 0
	}
	return s.starts[len(s.batches)-1] + s.batches[len(s.batches)-1].rows
}

// index reads file k once, noting where its schema, dictionaries and
// record batches lie, and the row count of each batch.
func (s *hfSource) index(k int) error {
	st, err := s.files[k].Stat()
	if err != nil {
		return err
	}
	in := &countingReader{r: io.NewSectionReader(s.files[k], 0, st.Size())}
	msgs := &locatingMessages{MessageReader: ipc.NewMessageReader(in), in: in}
	r, err := ipc.NewReaderFromMessageReader(msgs)
	if err != nil {
		return fmt.Errorf("not an Arrow IPC stream: %w", err)
	}
	defer r.Release()
	names := make([]string, 0, len(r.Schema().Fields()))
	for _, f := range r.Schema().Fields() {
		names = append(names, f.Name)
	}
	if k == 0 {
		s.names = names
	} else if !slices.Equal(names, s.names) {
		return errors.New("its columns differ from the first data file's")
	}
	for r.Next() {
		n := r.Record().NumRows()
		if n == 0 {
			continue
		}
		start := s.total()
		s.batches = append(s.batches, arrowBatch{file: k, schema: msgs.schema, dicts: slices.Clone(msgs.dicts), batch: msgs.batch, rows: n})
		s.starts = append(s.starts, start)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("read record batches: %w", err)
	}
	return nil
}

func (s *hfSource) rows() int64       { return s.starts[len(s.starts)-1] }
func (s *hfSource) columns() []string { return s.names }

// row decodes the batch holding row i: the file's schema, its
// dictionaries, then that batch, as a stream of their own.
func (s *hfSource) row(_ context.Context, i int64) (map[string]any, error) {
	b := sort.Search(len(s.batches), func(b int) bool { return s.starts[b+1] > i })
	batch := s.batches[b]
	f := s.files[batch.file]
	parts := []io.Reader{io.NewSectionReader(f, batch.schema.off, batch.schema.n)}
	for _, d := range batch.dicts {
		parts = append(parts, io.NewSectionReader(f, d.off, d.n))
	}
	parts = append(parts, io.NewSectionReader(f, batch.batch.off, batch.batch.n))
	r, err := ipc.NewReader(io.MultiReader(parts...))
	if err != nil {
		return nil, fmt.Errorf("decode record batch %d: %w", b, err)
	}
	defer r.Release()
	if !r.Next() {
		err := r.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("decode record batch %d: %w", b, err)
	}
	rec := r.Record()
	j := int(i - s.starts[b])
	row := make(map[string]any, len(s.names))
	for c, name := range s.names {
		row[name] = arrowValue(rec.Column(c), j)
	}
	return row, nil
}

// arrowValue is cell j of arr as Go: text, an int64 or float64, a bool,
// nil, or (a list or struct) what encoding/json writes.
func arrowValue(arr arrow.Array, j int) any {
	if arr.IsNull(j) {
		return nil
	}
	switch a := arr.(type) {
	case *array.String:
		return a.Value(j)
	case *array.LargeString:
		return a.Value(j)
	case *array.Binary:
		return string(a.Value(j))
	case *array.LargeBinary:
		return string(a.Value(j))
	}
	switch v := arr.GetOneForMarshal(j).(type) {
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return int64(v)
	case float32:
		return float64(v)
	default:
		return v
	}
}

func (s *hfSource) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
