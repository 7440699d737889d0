package embedded

import (
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// countSeries is how many stored series vs matches, whatever their samples'
// times: the series side of a subquery's cost, an upper bound of what the
// engine will select, counted without copying any sample.
func (s *Store) countSeries(vs *parser.VectorSelector) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	count := func(list []*memSeries) int {
		n := 0
		for _, c := range list {
			if matches(c.lbls, vs.LabelMatchers) {
				n++
			}
		}
		return n
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == metricName && m.Type == labels.MatchEqual {
			return count(s.byName[m.Value])
		}
	}
	n := 0
	for _, list := range s.byName {
		n += count(list)
	}
	return n
}
