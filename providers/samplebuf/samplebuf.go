// Package samplebuf holds a provider's samples until the engine's Signals
// call takes them: series get ids, samples a cursor, an instance id tells a
// restarted provider apart.
package samplebuf

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/providers"
)

// Retention is how much of the newest history a Buffer keeps for a
// Signals call to take: the embedded store's 30 minutes and a margin, so
// nothing the store would keep is dropped. A request that advances the
// world by hours at once (a query late in a long trace) would otherwise
// buffer every sample of those hours.
const Retention = 35 * time.Minute

// Buffer is the world's sink out of process: series get ids, samples wait
// in order until the engine's Signals call has taken them. A sample is
// dropped once a later call asks from a cursor past it, or once it is older
// than Retention before the newest.
type Buffer struct {
	mu     sync.Mutex
	series []providers.SeriesDef
	// ids finds a series' id by its labels, for a caller without the
	// cache: a world rebuilt from the state file has new handles for the
	// series the old one defined.
	ids      map[string]uint64
	samples  []providers.Sample
	base     uint64 // cursor of samples[0]
	instance string
	// maxSeries and maxSamples bound a buffer nobody may read for hours
	// (0: only Retention bounds it).
	maxSeries, maxSamples int
}

// handle is what a caller's cache keeps: the series' id in one instance.
type handle struct {
	instance string
	id       uint64
}

// NewBuffer returns an empty buffer with a fresh instance id, so a
// restarted provider is told apart from the one before.
func NewBuffer() *Buffer {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Buffer{instance: hex.EncodeToString(b), ids: map[string]uint64{}}
}

// NewBounded returns a buffer of at most maxSeries series and maxSamples
// samples, for a node agent whose series come and go with the backends
// (every pod IP a new series) and whose Signals may go unread: past
// maxSeries the buffer starts over as a new instance (a reader starts from
// zero, as after a restart); past maxSamples the oldest quarter goes.
func NewBounded(maxSeries, maxSamples int) *Buffer {
	b := NewBuffer()
	b.maxSeries, b.maxSamples = maxSeries, maxSamples
	return b
}

// AppendCached records a sample; cache keeps the series' id.
func (b *Buffer) AppendCached(l labels.Labels, cache *any, t int64, v float64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := (*cache).(handle)
	if !ok || h.instance != b.instance {
		key := l.String()
		id, ok := b.ids[key]
		if !ok {
			if b.maxSeries > 0 && len(b.series) >= b.maxSeries {
				b.restart()
			}
			id = uint64(len(b.series))
			b.series = append(b.series, providers.SeriesDef{ID: id, Labels: l.Map()})
			b.ids[key] = id
		}
		h = handle{b.instance, id}
		*cache = h
	}
	b.samples = append(b.samples, providers.Sample{Series: h.id, T: t, V: v})
	if b.maxSamples > 0 && len(b.samples) > b.maxSamples {
		drop := len(b.samples) / 4
		b.samples = append(b.samples[:0], b.samples[drop:]...)
		b.base += uint64(drop)
	}
	// Samples come in time order. Forget those past the retention once they
	// are half a retention's worth, so the copy is paid for: at most one
	// and a half retentions are held.
	keep := t - Retention.Milliseconds()
	if b.samples[0].T < keep-Retention.Milliseconds()/2 {
		drop := sort.Search(len(b.samples), func(i int) bool { return b.samples[i].T >= keep })
		b.samples = append(b.samples[:0], b.samples[drop:]...)
		b.base += uint64(drop)
	}
	return nil
}

// restart forgets every series and sample under a new instance id.
func (b *Buffer) restart() {
	fresh := NewBuffer()
	b.series, b.ids, b.samples, b.base, b.instance = nil, fresh.ids, nil, 0, fresh.instance
}

// Take returns series from req.KnownSeries and samples from req.Cursor,
// at most req.MaxSamples (0: all). A request from another instance starts
// from zero.
func (b *Buffer) Take(req providers.SignalsRequest) providers.SignalsResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	cursor, known := req.Cursor, req.KnownSeries
	if req.Instance != b.instance {
		cursor, known = b.base, 0
	}
	if cursor < b.base {
		cursor = b.base
	}
	// Everything before the cursor has been taken: forget it.
	if drop := int(cursor - b.base); drop > 0 && drop <= len(b.samples) {
		b.samples = append(b.samples[:0], b.samples[drop:]...)
		b.base = cursor
	}
	resp := providers.SignalsResponse{Instance: b.instance}
	if known < uint64(len(b.series)) {
		resp.Series = append([]providers.SeriesDef(nil), b.series[known:]...)
	}
	n := len(b.samples)
	if req.MaxSamples > 0 && n > req.MaxSamples {
		n, resp.More = req.MaxSamples, true
	}
	resp.Samples = append([]providers.Sample(nil), b.samples[:n]...)
	resp.Cursor = b.base + uint64(n)
	return resp
}
