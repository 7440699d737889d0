package scrape

import (
	"context"
	"log/slog"
	"time"
)

// DefaultInterval is the time between cycles when none is configured.
const DefaultInterval = 5 * time.Second

// Config is what one cycle scrapes and how.
type Config struct {
	Interval time.Duration
	// Timeout bounds each target's scrape.
	Timeout time.Duration
	Targets []Target
}

// Loop scrapes on its own goroutine until its context ends, so a watch's
// plans read the store meanwhile and never wait for a scrape.
type Loop struct {
	Scraper *Scraper
	// Config is asked at the start of every cycle, so an edited Environment
	// and pods that came or went count from the next cycle on. Its context
	// ends after one interval: a discovery that hangs delays one cycle,
	// never the loop.
	Config func(ctx context.Context) Config
	// Now stamps each cycle's samples (default time.Now); After waits
	// between cycles (default time.After). Tests drive both.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Log gets a line when a target goes down or comes back (default
	// slog.Default()): once per change, not once per cycle.
	Log *slog.Logger
	// Cycled, when set, gets every cycle's results.
	Cycled func(at time.Time, res []Result)

	up       map[string]bool
	interval time.Duration
	overran  bool
}

// Run scrapes at once, then every interval, until ctx ends. A cycle that
// overruns the interval skips the starts it missed instead of queueing
// them.
func (l *Loop) Run(ctx context.Context) {
	now, after := l.Now, l.After
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = time.After
	}
	for ctx.Err() == nil {
		start := now()
		l.cycle(ctx, start)
		interval := l.interval
		wait := interval - now().Sub(start)
		if wait < 0 {
			if !l.overran {
				l.logger().Warn("a scrape cycle took longer than the interval; cycles start at the next tick after the last ends", "interval", interval, "took", now().Sub(start))
			}
			l.overran = true
			wait = interval - (-wait)%interval
		} else {
			l.overran = false
		}
		select {
		case <-ctx.Done():
			return
		case <-after(wait):
		}
	}
}

func (l *Loop) cycle(ctx context.Context, at time.Time) {
	if l.interval <= 0 {
		l.interval = DefaultInterval
	}
	cctx, cancel := context.WithTimeout(ctx, l.interval)
	cfg := l.Config(cctx)
	cancel()
	if cfg.Interval > 0 {
		l.interval = cfg.Interval
	}
	s := *l.Scraper
	s.Timeout = cfg.Timeout
	res := s.Once(ctx, cfg.Targets, at)
	if ctx.Err() != nil {
		// Shutting down: the failures are the cancellation's.
		return
	}
	l.report(res)
	if l.Cycled != nil {
		l.Cycled(at, res)
	}
}

// report logs the targets whose state changed since the last cycle.
func (l *Loop) report(res []Result) {
	log := l.logger()
	was := l.up
	l.up = make(map[string]bool, len(res))
	up, kept := 0, 0
	for _, r := range res {
		k := r.Target.key()
		l.up[k] = r.Up
		prev, seen := was[k]
		switch {
		case !r.Up && (!seen || prev):
			log.Warn("scrape target down: its up is 0", "job", r.Target.Job, "url", r.Target.URL, "err", r.Err)
		case r.Up && seen && !prev:
			log.Info("scrape target back up", "job", r.Target.Job, "url", r.Target.URL)
		}
		if r.Up {
			up++
		}
		kept += r.Kept
	}
	log.Debug("scraped", "targets", len(res), "up", up, "samples", kept)
}

func (l *Loop) logger() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.Default()
}
