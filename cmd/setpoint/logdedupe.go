package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// dedupe collapses a log line repeated back to back (a provider down
// during its restart backoff fails every call with the same words): the
// first is written, the repeats are counted, and the count is written
// with the next different line, or at the first repeat after window.
type dedupe struct {
	next   slog.Handler
	window time.Duration
	attrs  string // WithAttrs/WithGroup, part of what makes a line the same

	mu    *sync.Mutex
	state *dedupeState
}

type dedupeState struct {
	last   string
	lastAt time.Time
	count  int
	level  slog.Level
	msg    string
}

func newDedupe(next slog.Handler, window time.Duration) *dedupe {
	return &dedupe{next: next, window: window, mu: &sync.Mutex{}, state: &dedupeState{}}
}

func (d *dedupe) Enabled(ctx context.Context, l slog.Level) bool { return d.next.Enabled(ctx, l) }

func (d *dedupe) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(d.attrs)
	b.WriteString(r.Level.String())
	b.WriteByte(0)
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteByte(0)
		b.WriteString(a.String())
		return true
	})
	key := b.String()
	d.mu.Lock()
	s := d.state
	if key == s.last && r.Time.Sub(s.lastAt) < d.window {
		s.count++
		d.mu.Unlock()
		return nil
	}
	repeated, level, msg := s.count, s.level, s.msg
	s.last, s.lastAt, s.count, s.level, s.msg = key, r.Time, 0, r.Level, r.Message
	d.mu.Unlock()
	if repeated > 0 {
		rr := slog.NewRecord(r.Time, level, "the line before repeated", 0)
		rr.AddAttrs(slog.String("line", msg), slog.Int("times", repeated))
		if err := d.next.Handle(ctx, rr); err != nil {
			return err
		}
	}
	return d.next.Handle(ctx, r)
}

func (d *dedupe) WithAttrs(as []slog.Attr) slog.Handler {
	c := *d
	c.next = d.next.WithAttrs(as)
	for _, a := range as {
		c.attrs += a.String() + "\x00"
	}
	return &c
}

func (d *dedupe) WithGroup(name string) slog.Handler {
	c := *d
	c.next = d.next.WithGroup(name)
	c.attrs += "group " + name + "\x00"
	return &c
}
