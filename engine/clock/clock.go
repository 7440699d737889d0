// Package clock gives the engine its time: the wall clock for watch and
// one-shot runs, a virtual clock for the sim loop (watch, which also
// needs timers, has its own clocks in engine/watch). Logic never reads the
// wall itself; it is handed a Clock.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Wall is the real clock.
type Wall struct{}

// Now returns the wall time.
func (Wall) Now() time.Time { return time.Now() }

// Virtual is a clock that moves only when told.
type Virtual struct {
	mu  sync.Mutex
	now time.Time
}

// NewVirtual returns a virtual clock at t.
func NewVirtual(t time.Time) *Virtual { return &Virtual{now: t} }

// Now returns the virtual time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// Set moves the clock to t (never backwards).
func (v *Virtual) Set(t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t.After(v.now) {
		v.now = t
	}
}

// Advance moves the clock forward by d.
func (v *Virtual) Advance(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = v.now.Add(d)
}
