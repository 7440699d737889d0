package embedded

import (
	"maps"
	"slices"
)

// RequestedNames lists, sorted, the metric names queries have asked for:
// the only names whose scraped samples the store keeps, so an operator
// asking why a series is missing needs to see them (Stats counts what is
// kept, not what is wanted). There are at most MaxRequested; leftOut counts
// the names asked for, since the store was made, that it forgot to stay
// within that rather than because they expired (a name missing from the
// list while it is not 0 may have been pushed out). One snapshot: the two
// agree.
func (s *Store) RequestedNames() (names []string, leftOut int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.requested.byName)), s.requested.overCap
}
