package watch

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Clock is the time the queue and the periodic tick run on: the engine's
// time (the wall, or virtual time scaled from it), with timers so a due key
// is handed out at its due time, not at the next poll. It satisfies the
// engine's clock.Clock (Now only).
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now (at once for d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it had fired or stopped.
	Stop() bool
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns the wall time.
func (RealClock) Now() time.Time { return time.Now() }

// NewTimer returns a wall-clock timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// ScaledClock maps a base clock onto virtual time: origin at the moment it is
// made, then speed virtual seconds per base second (watch on the sim world).
// Its timers wait d/speed on the base clock, rounded up so they never fire
// before virtual time reaches their deadline.
type ScaledClock struct {
	base   Clock
	origin time.Time
	start  time.Time
	speed  float64
}

// NewScaledClock starts a scaled clock at origin; speed <= 0 means 1.
func NewScaledClock(base Clock, origin time.Time, speed float64) *ScaledClock {
	if speed <= 0 {
		speed = 1
	}
	return &ScaledClock{base: base, origin: origin, start: base.Now(), speed: speed}
}

// Now returns the virtual time.
func (s *ScaledClock) Now() time.Time {
	return s.origin.Add(time.Duration(float64(s.base.Now().Sub(s.start)) * s.speed))
}

// NewTimer fires when virtual time has advanced by d.
func (s *ScaledClock) NewTimer(d time.Duration) Timer {
	if d <= 0 {
		return s.base.NewTimer(0)
	}
	return s.base.NewTimer(time.Duration(math.Ceil(float64(d) / s.speed)))
}

// FakeClock is a Clock for tests: it moves only when told, and its timers
// fire when it reaches their deadline.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFakeClock returns a fake clock at t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches now+d.
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clk: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock forward by d and fires the timers now due.
func (c *FakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires the timers now due.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	kept := c.timers[:0]
	for _, x := range c.timers {
		if x.at.After(c.now) {
			kept = append(kept, x)
			continue
		}
		x.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// Deadlines returns the deadlines of the timers waiting to fire, earliest
// first: a test sees what a component is waiting for.
func (c *FakeClock) Deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, 0, len(c.timers))
	for _, t := range c.timers {
		out = append(out, t.at)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

type fakeTimer struct {
	clk *FakeClock
	at  time.Time
	ch  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}
