package embedded

import (
	"maps"
	"slices"
)

// RequestedNames lists, sorted, the metric names queries have asked for:
// the only names whose scraped samples the store keeps, so an operator
// asking why a series is missing needs to see them (Stats counts what is
// kept, not what is wanted). There are at most MaxRequested.
func (s *Store) RequestedNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.requested.byName))
}

// RequestedOverCap counts the names asked for, since the store was made,
// that it forgot to keep within MaxRequested rather than because they
// expired: a name missing from RequestedNames while this is not 0 may have
// been pushed out.
func (s *Store) RequestedOverCap() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.requested.overCap
}
