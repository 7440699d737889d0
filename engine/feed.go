package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/setpoint-dev/setpoint/providers"
)

// SignalSink takes the samples a provider hands over (the embedded store).
type SignalSink interface {
	Ingest(resp providers.SignalsResponse) error
}

// Feed pulls one provider's samples into a sink before every plan, from
// where the last pull stopped; a provider that restarted (another
// instance) is read again from its start.
type Feed struct {
	Provider providers.SignalSource
	Sink     SignalSink
	// PageSize bounds one Signals call (0: 100,000 samples).
	PageSize int

	cursor, known uint64
	instance      string
}

// Pull fetches everything new up to now.
func (f *Feed) Pull(ctx context.Context, now time.Time) {
	page := f.PageSize
	if page <= 0 {
		page = 100_000
	}
	for {
		resp := f.Provider.Signals(ctx, providers.SignalsRequest{Now: now, Cursor: f.cursor, KnownSeries: f.known, MaxSamples: page, Instance: f.instance})
		for _, d := range resp.Diagnostics {
			slog.Error("signals", "error", d.Error())
		}
		if resp.Instance != f.instance {
			f.instance, f.cursor, f.known = resp.Instance, 0, 0
		}
		if err := f.Sink.Ingest(resp); err != nil {
			slog.Error("signals", "error", err)
		}
		f.known += uint64(len(resp.Series))
		f.cursor = resp.Cursor
		if !resp.More || ctx.Err() != nil {
			return
		}
	}
}
