package embedded

import (
	"fmt"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/providers"
)

// Ingestor appends a provider's samples to a store, mapping the provider's
// series ids to the store's series. One Ingestor per provider.
type Ingestor struct {
	Store    *Store
	instance string
	series   map[uint64]*any
	labels   map[uint64]labels.Labels
}

// Ingest appends one Signals response. A new provider instance (a restart)
// brings new ids; samples the store already has (a replayed timeline) are
// skipped, not errors.
func (g *Ingestor) Ingest(resp providers.SignalsResponse) error {
	if resp.Instance != g.instance || g.series == nil {
		g.instance = resp.Instance
		g.series, g.labels = map[uint64]*any{}, map[uint64]labels.Labels{}
	}
	for _, s := range resp.Series {
		g.labels[s.ID] = labels.FromMap(s.Labels)
		g.series[s.ID] = new(any)
	}
	unknown := 0
	for _, x := range resp.Samples {
		l, ok := g.labels[x.Series]
		if !ok {
			unknown++
			continue
		}
		_ = g.Store.AppendCached(l, g.series[x.Series], x.T, x.V) // out of order: already there
	}
	if unknown > 0 {
		return fmt.Errorf("%d samples named series the provider never defined; dropped", unknown)
	}
	return nil
}
