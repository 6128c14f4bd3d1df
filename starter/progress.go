package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/evalflow/evalflow/workflows"
)

// progressBar draws a run's progress: in place on a terminal, as a line every
// few seconds otherwise (CI logs).
type progressBar struct {
	w        io.Writer
	tty      bool
	drawn    bool
	lastLine time.Time
	first    time.Time
	firstN   int64
	last     string
}

func newProgressBar(w io.Writer) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progressBar{w: w, tty: tty}
}

func (b *progressBar) draw(p workflows.Progress) {
	now := time.Now()
	if b.first.IsZero() {
		b.first, b.firstN = now, p.Done
	}
	if !b.tty && now.Sub(b.lastLine) < 5*time.Second && p.Done < p.Rollouts {
		return
	}
	b.lastLine = now
	line := renderProgress(p, now.Sub(b.first), p.Done-b.firstN)
	if !b.tty && line == b.last {
		return
	}
	b.last = line
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(b.w, line)
	}
	b.drawn = true
}

func (b *progressBar) finish() {
	if b.tty && b.drawn {
		fmt.Fprintln(b.w)
	}
}

// renderProgress formats one progress line; rate and ETA come from the
// rollouts finished while this process watched.
func renderProgress(p workflows.Progress, watched time.Duration, finished int64) string {
	const width = 24
	filled := 0
	if p.Rollouts > 0 {
		filled = int(int64(width) * p.Done / p.Rollouts)
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	line := fmt.Sprintf("%s %d/%d done · %d failed · %d running", bar, p.Done, p.Rollouts, p.Failed, p.Running)
	if secs := watched.Seconds(); secs > 0 && finished > 0 {
		rate := float64(finished) / secs
		eta := time.Duration(float64(p.Rollouts-p.Done) / rate * float64(time.Second)).Round(time.Second)
		line += fmt.Sprintf(" · %.1f/s · ETA %s", rate, eta)
	}
	if p.Done > 0 {
		line += fmt.Sprintf(" · reward %.3f", p.MeanReward)
	}
	return line
}
