package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/evalflow/evalflow/rollout"
)

// rolloutsFile is the run's append-only record log.
const rolloutsFile = "rollouts.jsonl"

// run is the in-memory index of one run's rollouts.jsonl. It only ever reads
// the bytes appended since its last read.
type run struct {
	dir    string
	offset int64 // bytes of complete lines consumed
	lines  int   // complete lines consumed
	recs   []Record
	byKey  map[string]int
}

func newRun(dir string) *run {
	return &run{dir: dir, byKey: map[string]int{}}
}

func (r *run) path() string { return filepath.Join(r.dir, rolloutsFile) }

func (r *run) get(key string) (Record, bool) {
	i, ok := r.byKey[key]
	if !ok {
		return Record{}, false
	}
	return r.recs[i], true
}

// add indexes a record read from or appended to the log. A later record of a
// key supersedes a stored failure; a stored success is final.
func (r *run) add(rec Record, size int64) {
	r.offset += size
	r.lines++
	if i, dup := r.byKey[rec.Key]; dup {
		if r.recs[i].Status == rollout.StatusError {
			r.recs[i] = rec
		}
		return
	}
	r.byKey[rec.Key] = len(r.recs)
	r.recs = append(r.recs, rec)
}

func (r *run) reset() {
	r.offset, r.lines, r.recs, r.byKey = 0, 0, nil, map[string]int{}
}

// refresh reads the lines appended since the last call. It must run under the
// run's file lock, where any unterminated last line is the remains of a
// writer that died mid-append: it is skipped and its length returned as torn.
func (r *run) refresh() (torn int64, err error) {
	f, err := os.Open(r.path())
	if errors.Is(err, fs.ErrNotExist) {
		r.reset()
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open rollouts: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat rollouts: %w", err)
	}
	if fi.Size() < r.offset {
		// Replaced or cut by hand: start over.
		r.reset()
	}
	br := bufio.NewReader(io.NewSectionReader(f, r.offset, fi.Size()-r.offset))
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return int64(len(line)), nil
		}
		if err != nil {
			return 0, fmt.Errorf("read rollouts: %w", err)
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			r.offset += int64(len(line))
			r.lines++
			continue
		}
		var rec Record
		if err := json.Unmarshal(trimmed, &rec); err != nil {
			return 0, fmt.Errorf("%s line %d: %w", r.path(), r.lines+1, err)
		}
		r.add(rec, int64(len(line)))
	}
}
