package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress writes "what: done/total" over one terminal line, at most every
// interval, and nothing when w is not a terminal (logs and CI stay clean).
type progress struct {
	w        io.Writer
	what     string
	interval time.Duration
	mu       sync.Mutex
	last     time.Time
	shown    bool
}

// newProgress returns nil unless w is a terminal.
func newProgress(w io.Writer, what string) *progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: w, what: what, interval: 200 * time.Millisecond}
}

// update shows done/total if interval passed since the last show.
func (p *progress) update(done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= p.interval && done < total {
		p.last = now
		p.shown = true
		fmt.Fprintf(p.w, "\r%s: %d/%d", p.what, done, total)
	}
}

// done clears the line, so what follows starts on a clean one.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
