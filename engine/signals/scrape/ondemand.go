package scrape

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// configTimeout bounds finding the targets of a one-shot command.
const configTimeout = 10 * time.Second

// DefaultSlack is how long before now a query's time may be and still be
// answered by a scrape made now.
const DefaultSlack = time.Minute

// OnDemand is the signal source of a one-shot command (plan, apply,
// query). Such a process plans once, before any query has asked for a
// metric name, so a scrape before planning would keep nothing but up.
// OnDemand scrapes instead when a query first names metrics, and records
// the samples at the query's time: what the plan would have read had the
// scrape run just before it. Later queries that name only metrics already
// scraped read the store as it is.
type OnDemand struct {
	Source  *embedded.Source
	Scraper *Scraper
	// Config gives the targets and timeout, once, at the first scrape.
	Config func(ctx context.Context) Config
	// Now is the wall clock (default time.Now).
	Now func() time.Time
	// Slack (default DefaultSlack) bounds how far before now a query's
	// time may be: a scrape says nothing about an hour ago (query --at),
	// nor about a virtual time.
	Slack time.Duration
	Log   *slog.Logger

	mu      sync.Mutex
	started bool
	cfg     Config
	scraped map[string]bool
	// down are targets that failed in this process: they already have
	// their up == 0, and waiting for their timeout again would only slow
	// the plan.
	down map[string]bool
}

var _ signals.Source = (*OnDemand)(nil)

// Query scrapes for the names expr reads that no scrape has kept yet, then
// evaluates expr over the store.
func (o *OnDemand) Query(ctx context.Context, expr string, at time.Time) (signals.Result, error) {
	if names, err := o.Source.Parse(expr); err == nil {
		o.scrape(ctx, names, at)
	}
	return o.Source.Query(ctx, expr, at)
}

func (o *OnDemand) scrape(ctx context.Context, names []string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var fresh []string
	for _, n := range names {
		if n != "up" && !o.scraped[n] {
			fresh = append(fresh, n)
		}
	}
	if o.started && len(fresh) == 0 {
		return
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	slack := o.Slack
	if slack <= 0 {
		slack = DefaultSlack
	}
	if t := now(); at.After(t.Add(time.Second)) || t.Sub(at) > slack {
		return
	}
	if !o.started {
		// Discovery (a pod list) must not hold a plan for long: past this,
		// the static targets and the pods found so far are scraped.
		cctx, cancel := context.WithTimeout(ctx, configTimeout)
		o.cfg = o.Config(cctx)
		cancel()
		o.scraped, o.down = map[string]bool{}, map[string]bool{}
		o.started = true
	}
	o.Source.Store.Request(fresh...)
	targets := make([]Target, 0, len(o.cfg.Targets))
	for _, t := range o.cfg.Targets {
		if !o.down[t.key()] {
			targets = append(targets, t)
		}
	}
	s := *o.Scraper
	s.Timeout = o.cfg.Timeout
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	for _, r := range s.Once(ctx, targets, at) {
		if !r.Up && ctx.Err() == nil {
			o.down[r.Target.key()] = true
			log.Warn("scrape target down: its up is 0", "job", r.Target.Job, "url", r.Target.URL, "err", r.Err)
		}
	}
	for _, n := range fresh {
		o.scraped[n] = true
	}
}
