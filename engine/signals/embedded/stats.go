package embedded

import (
	"maps"
	"slices"
)

// RequestedNames lists, sorted, the metric names queries have asked for:
// the only names whose scraped samples the store keeps, so an operator
// asking why a series is missing needs to see them (Stats counts what is
// kept, not what is wanted).
func (s *Store) RequestedNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.requested))
}
