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
}

// NewBuffer returns an empty buffer with a fresh instance id, so a
// restarted provider is told apart from the one before.
func NewBuffer() *Buffer {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Buffer{instance: hex.EncodeToString(b), ids: map[string]uint64{}}
}

// AppendCached records a sample; cache keeps the series' id.
func (b *Buffer) AppendCached(l labels.Labels, cache *any, t int64, v float64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	id, ok := (*cache).(uint64)
	if !ok {
		key := l.String()
		if id, ok = b.ids[key]; !ok {
			id = uint64(len(b.series))
			b.series = append(b.series, providers.SeriesDef{ID: id, Labels: l.Map()})
			b.ids[key] = id
		}
		*cache = id
	}
	b.samples = append(b.samples, providers.Sample{Series: id, T: t, V: v})
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
