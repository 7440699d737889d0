package plugin

import "time"

// SetClock makes m measure its restart backoff on now instead of the wall.
func SetClock(m *Manager, now func() time.Time) { m.clock = now }
