// Package schedule decides a Schedule: when a workload sleeps and wakes
// (0→N, from activity, wake-up times and dependencies) and how many
// replicas it runs while awake (N→M, from triggers bounded by the
// Kubernetes HPA's behavior). Every piece is a pure function: time and
// history are passed in, new history is returned, nothing is stored.
package schedule

import (
	"fmt"
	"sort"
	"time"
)

// TimeOfDay is a wall-clock time, "HH:MM".
type TimeOfDay struct{ Hour, Minute int }

// ParseTimeOfDay reads "HH:MM" (00:00 to 23:59).
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	var t TimeOfDay
	if len(s) != 5 || s[2] != ':' {
		return t, fmt.Errorf("time of day %q: want HH:MM", s)
	}
	for i, c := range []byte(s) {
		if i != 2 && (c < '0' || c > '9') {
			return t, fmt.Errorf("time of day %q: want HH:MM", s)
		}
	}
	t.Hour = int(s[0]-'0')*10 + int(s[1]-'0')
	t.Minute = int(s[3]-'0')*10 + int(s[4]-'0')
	if t.Hour > 23 || t.Minute > 59 {
		return t, fmt.Errorf("time of day %q: want 00:00 to 23:59", s)
	}
	return t, nil
}

func (t TimeOfDay) String() string { return fmt.Sprintf("%02d:%02d", t.Hour, t.Minute) }

func (t TimeOfDay) minutes() int { return t.Hour*60 + t.Minute }

// On is the instant the wall clock of loc first shows t on the date of
// day (year, month, day of loc). A time skipped by a change to summer
// time (02:30 when clocks jump from 02:00 to 03:00) happens at the jump;
// a time shown twice (when clocks go back) happens the first time.
func (t TimeOfDay) On(year int, month time.Month, day int, loc *time.Location) time.Time {
	c := time.Date(year, month, day, t.Hour, t.Minute, 0, 0, loc)
	if wall(c, loc) == t.minutes() && sameDay(c, year, month, day, loc) {
		// Shown twice? Only where the offset changed in the two hours
		// before; then take the earliest instant that shows it.
		_, now := c.Zone()
		if _, before := c.Add(-2 * time.Hour).In(loc).Zone(); before == now {
			return c
		}
		for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
			e := c.Add(-back)
			if wall(e, loc) == t.minutes() && sameDay(e, year, month, day, loc) {
				c = e
			}
		}
		return c
	}
	// Skipped: the first instant of the day whose wall clock is past it.
	lo := time.Date(year, month, day, 0, 0, 0, 0, loc).Add(-3 * time.Hour)
	hi := time.Date(year, month, day, 23, 59, 0, 0, loc).Add(3 * time.Hour)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if dayIndex(mid, loc, year, month, day)*1440+wall(mid, loc) >= t.minutes() {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi.Truncate(time.Second)
}

// wall is t's wall-clock minute of the day in loc.
func wall(t time.Time, loc *time.Location) int {
	l := t.In(loc)
	return l.Hour()*60 + l.Minute()
}

func sameDay(t time.Time, year int, month time.Month, day int, loc *time.Location) bool {
	y, m, d := t.In(loc).Date()
	return y == year && m == month && d == day
}

// dayIndex is -1, 0 or 1: t's local date before, on or after the date.
func dayIndex(t time.Time, loc *time.Location, year int, month time.Month, day int) int {
	y, m, d := t.In(loc).Date()
	a := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	b := time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
	switch {
	case a.Before(b):
		return -1
	case a.After(b):
		return 1
	}
	return 0
}

// LastWakeUp is the latest wake-up at or before now (zero when there are
// none): wake-ups count as activity at that instant.
func LastWakeUp(now time.Time, loc *time.Location, wakeUps []TimeOfDay) time.Time {
	at, _ := lastWakeUp(now, loc, wakeUps)
	return at
}

// lastWakeUp is LastWakeUp and the time of day it is of (which the wall
// clock does not show when the day skipped it).
func lastWakeUp(now time.Time, loc *time.Location, wakeUps []TimeOfDay) (time.Time, TimeOfDay) {
	var last time.Time
	var of TimeOfDay
	y, m, d := now.In(loc).Date()
	for back := 0; back <= 1; back++ {
		for _, w := range wakeUps {
			at := w.On(y, m, d-back, loc)
			if !at.After(now) && at.After(last) {
				last, of = at, w
			}
		}
		if !last.IsZero() {
			break
		}
	}
	return last, of
}

// wakeUpLabel names a wake-up that ran at at: by its time of day, and,
// when the clock change skipped that time that day (02:30 when clocks
// jump from 02:00 to 03:00), the wall time it ran at, so a plan never
// names a wake-up the spec does not have ("wake-up at 03:00").
func wakeUpLabel(of TimeOfDay, at time.Time, loc *time.Location) string {
	if wall(at, loc) == of.minutes() {
		return "wake-up at " + of.String()
	}
	return fmt.Sprintf("wake-up %s, run at %s: the clock change skipped %s that day", of, at.In(loc).Format("15:04 MST"), of)
}

// NextWakeUp is the earliest wake-up after now (zero when there are none).
func NextWakeUp(now time.Time, loc *time.Location, wakeUps []TimeOfDay) time.Time {
	var next time.Time
	y, m, d := now.In(loc).Date()
	for ahead := 0; ahead <= 1; ahead++ {
		for _, w := range wakeUps {
			at := w.On(y, m, d+ahead, loc)
			if at.After(now) && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		if !next.IsZero() {
			break
		}
	}
	return next
}

// TimeoutFrom is an idle timeout in force from a time of day on.
type TimeoutFrom struct {
	From  TimeOfDay
	After time.Duration
}

// TimeoutAt is the idle timeout in force at now: the entry whose From is
// the latest one passed today (before the first of the day, yesterday's
// last still holds), or def when there are none. since is when that entry
// took over.
func TimeoutAt(now time.Time, loc *time.Location, def time.Duration, entries []TimeoutFrom) (after time.Duration, since time.Time) {
	if len(entries) == 0 {
		return def, time.Time{}
	}
	es := entries
	if !sort.SliceIsSorted(es, func(i, j int) bool { return es[i].From.minutes() < es[j].From.minutes() }) {
		es = append([]TimeoutFrom(nil), entries...)
		sort.Slice(es, func(i, j int) bool { return es[i].From.minutes() < es[j].From.minutes() })
	}
	y, m, d := now.In(loc).Date()
	for i := len(es) - 1; i >= 0; i-- {
		if at := es[i].From.On(y, m, d, loc); !at.After(now) {
			return es[i].After, at
		}
	}
	last := es[len(es)-1]
	return last.After, last.From.On(y, m, d-1, loc)
}
