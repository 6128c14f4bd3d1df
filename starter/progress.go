package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/evalflow/evalflow/workflows"
)

// progressBar draws a run's progress: in place on a terminal, as a line every
// few seconds otherwise (CI logs). Whatever else must reach the user while it
// is drawn goes through notice, above it; log lines go to the log file.
type progressBar struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	drawn    bool // the bar is on screen, its line unfinished
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
	b.mu.Lock()
	defer b.mu.Unlock()
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
		b.drawn = true
	} else {
		fmt.Fprintln(b.w, line)
	}
}

// notice prints a line for the user above the bar: on a terminal it clears
// the bar's line, prints, and draws the bar again below.
func (b *progressBar) notice(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if b.drawn {
		fmt.Fprintf(b.w, "\r\033[K%s\n%s", msg, b.last)
		return
	}
	fmt.Fprintln(b.w, msg)
}

// finish ends the bar's line; the next draw starts a new bar, with its own
// rate.
func (b *progressBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprintln(b.w)
	}
	b.drawn, b.first, b.firstN, b.last = false, time.Time{}, 0, ""
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
