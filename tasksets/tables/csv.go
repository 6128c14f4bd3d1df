package tables

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/evalflow/evalflow/tasksets"
)

// csvSource is a CSV (or TSV) file read through an offset index: opening
// reads it once, checking every record and keeping where each starts; a row
// is read by parsing just its record.
type csvSource struct {
	name   string
	f      *os.File
	tsv    bool
	header []string
	// offsets[i] is where record i starts; offsets[len] is the end.
	offsets []int64
}

func openCSV(path string, tsv bool) (*csvSource, error) {
	f, err := tasksets.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &csvSource{name: path, f: f, tsv: tsv}
	if err := s.index(st.Size()); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *csvSource) reader(r io.Reader) *csv.Reader {
	cr := csv.NewReader(r)
	if s.tsv {
		cr.Comma = '\t'
	}
	return cr
}

// index reads the header and every record's offset. Errors give the
// record's line, never its content.
func (s *csvSource) index(size int64) error {
	cr := s.reader(io.NewSectionReader(s.f, 0, size))
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: empty: want a header line naming the columns", s.name)
	}
	if err != nil {
		return fmt.Errorf("%s: header: %w", s.name, csvErr(err))
	}
	header[0] = strings.TrimPrefix(header[0], "\uFEFF") // a byte order mark
	seen := map[string]bool{}
	for _, h := range header {
		if seen[h] {
			return fmt.Errorf("%s: header names column %q twice", s.name, h)
		}
		seen[h] = true
	}
	s.header = header
	cr.FieldsPerRecord = len(header)
	for {
		off := cr.InputOffset()
		_, err := cr.Read()
		if errors.Is(err, io.EOF) {
			s.offsets = append(s.offsets, off)
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", s.name, len(s.offsets)+1, csvErr(err))
		}
		s.offsets = append(s.offsets, off)
	}
}

// csvErr is a CSV parse error without the text it quotes.
func csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d, column %d: %w", pe.Line, pe.Column, pe.Err)
	}
	return err
}

func (s *csvSource) rows() int64       { return int64(len(s.offsets) - 1) }
func (s *csvSource) columns() []string { return s.header }

func (s *csvSource) row(_ context.Context, i int64) (map[string]any, error) {
	start, end := s.offsets[i], s.offsets[i+1]
	cr := s.reader(io.NewSectionReader(s.f, start, end-start))
	cr.FieldsPerRecord = len(s.header)
	rec, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read: %w", csvErr(err))
	}
	row := make(map[string]any, len(rec))
	for k, v := range rec {
		row[s.header[k]] = v
	}
	return row, nil
}

func (s *csvSource) Close() error { return s.f.Close() }
