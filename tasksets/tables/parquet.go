package tables

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/evalflow/evalflow/tasksets"
	"github.com/parquet-go/parquet-go"
)

// parquetSource is a Parquet file read by row group: opening reads only its
// footer; a row is read from the row group holding it, seeking to it.
type parquetSource struct {
	f    *os.File
	file *parquet.File
	// starts[g] is the index of row group g's first row; starts[len] the
	// row count.
	starts []int64
	// names are the top-level columns; leaf[k] is the name of leaf column k
	// when it is a top-level, non-repeated column, else "" (nested columns
	// are not read).
	names []string
	leaf  []string
	mu    sync.Mutex
}

func openParquet(path string) (*parquetSource, error) {
	f, err := tasksets.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &parquetSource{f: f, file: pf}
	var n int64
	for _, rg := range pf.RowGroups() {
		s.starts = append(s.starts, n)
		n += rg.NumRows()
	}
	s.starts = append(s.starts, n)
	for _, field := range pf.Schema().Fields() {
		s.names = append(s.names, field.Name())
	}
	for _, path := range pf.Schema().Columns() {
		name := ""
		if len(path) == 1 {
			if field := fieldNamed(pf.Schema().Fields(), path[0]); field != nil && field.Leaf() && !field.Repeated() {
				name = path[0]
			}
		}
		s.leaf = append(s.leaf, name)
	}
	return s, nil
}

func fieldNamed(fields []parquet.Field, name string) parquet.Field {
	for _, f := range fields {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

func (s *parquetSource) rows() int64       { return s.starts[len(s.starts)-1] }
func (s *parquetSource) columns() []string { return s.names }

func (s *parquetSource) row(_ context.Context, i int64) (map[string]any, error) {
	g := sort.Search(len(s.starts)-1, func(g int) bool { return s.starts[g+1] > i })
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := s.file.RowGroups()[g].Rows()
	defer rows.Close()
	if err := rows.SeekToRow(i - s.starts[g]); err != nil {
		return nil, fmt.Errorf("seek in row group %d: %w", g, err)
	}
	buf := make([]parquet.Row, 1)
	n, err := rows.ReadRows(buf)
	if n == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read row group %d: %w", g, err)
	}
	row := make(map[string]any, len(s.names))
	for _, name := range s.names {
		row[name] = nil // a nested column: present, not read
	}
	for _, v := range buf[0] {
		c := v.Column()
		if c < 0 || c >= len(s.leaf) || s.leaf[c] == "" {
			continue
		}
		row[s.leaf[c]] = parquetValue(v)
	}
	return row, nil
}

// parquetValue is a leaf value as Go: text, a number, a bool or nil.
func parquetValue(v parquet.Value) any {
	if v.IsNull() {
		return nil
	}
	switch v.Kind() {
	case parquet.Boolean:
		return v.Boolean()
	case parquet.Int32:
		return int64(v.Int32())
	case parquet.Int64:
		return v.Int64()
	case parquet.Float:
		return float64(v.Float())
	case parquet.Double:
		return v.Double()
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return string(v.ByteArray())
	default:
		return v.String()
	}
}

func (s *parquetSource) Close() error { return s.f.Close() }
