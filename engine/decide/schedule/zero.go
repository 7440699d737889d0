package schedule

import (
	"fmt"
	"strings"
	"time"
)

// Workload is what the 0→N decision knows of one workload at now.
type Workload struct {
	Name string
	// Activity is the last time something asked for it (a sample > 0 of
	// its activity query, or the provider's signal); zero: never seen.
	Activity time.Time
	// Current and Ready are its replicas now.
	Current, Ready int
	Min, AtStart   int
	// Idle is the idle timeout; ByTime overrides it by time of day.
	Idle    time.Duration
	ByTime  []TimeoutFrom
	WakeUps []TimeOfDay
	// Loc is the zone of the times of day (UTC when nil).
	Loc       *time.Location
	DependsOn []string
	// Gradual steps an idle workload down to 1 replica before the last
	// step to 0 (min 0), so the behavior's scale-down rules pace it.
	Gradual bool
}

// Zero is the 0→N decision for one workload.
type Zero struct {
	// Activity is the last activity counted: its own, a wake-up's, or a
	// dependent's (a dependency is as active as what needs it).
	Activity time.Time
	// From says where Activity came from.
	From    string
	Timeout time.Duration
	Idle    bool
	// Proposed is the replicas the schedule proposes: Min when idle,
	// AtStart to wake (from 0 or below Min) once every dependency has
	// ready replicas, else the current count.
	Proposed int
	// Waiting lists the dependencies without ready replicas that hold a
	// wake-up back.
	Waiting []string
	// Due is when this decision next changes by itself: the next wake-up
	// or the moment the workload becomes idle (zero: never).
	Due time.Time
	Why string
}

// DecideZero decides sleep and wake-up for a set of workloads at now
// (dependencies are looked up among them by name; a dependency that is
// not in the set is treated as not ready). It assumes no cycle among
// dependencies (validation refuses one) and stops at one if there is.
func DecideZero(now time.Time, ws []Workload) map[string]Zero {
	byName := make(map[string]*Workload, len(ws))
	for i := range ws {
		byName[ws[i].Name] = &ws[i]
	}
	// Own activity, wake-ups included.
	own := make(map[string]time.Time, len(ws))
	from := make(map[string]string, len(ws))
	for _, w := range ws {
		loc := w.Loc
		if loc == nil {
			loc = time.UTC
		}
		a, f := w.Activity, "activity"
		if wk, of := lastWakeUp(now, loc, w.WakeUps); wk.After(a) {
			a, f = wk, wakeUpLabel(of, wk, loc)
		}
		own[w.Name], from[w.Name] = a, f
	}
	// A dependency counts its dependents' activity (transitively).
	dependents := map[string][]string{}
	for _, w := range ws {
		for _, d := range w.DependsOn {
			dependents[d] = append(dependents[d], w.Name)
		}
	}
	// Memoised, each name once: a chain of 10,000 is linear. A name met
	// again while being computed (a cycle, refused by validation) counts
	// its own activity only.
	type eff struct {
		at   time.Time
		from string
	}
	memo := make(map[string]eff, len(ws))
	inProgress := map[string]bool{}
	var effective func(name string) (time.Time, string)
	effective = func(name string) (time.Time, string) {
		if e, ok := memo[name]; ok {
			return e.at, e.from
		}
		a, f := own[name], from[name]
		if inProgress[name] {
			return a, f
		}
		inProgress[name] = true
		for _, dep := range dependents[name] {
			if da, _ := effective(dep); da.After(a) {
				a, f = da, "dependent "+dep
			}
		}
		delete(inProgress, name)
		memo[name] = eff{a, f}
		return a, f
	}
	out := make(map[string]Zero, len(ws))
	for _, w := range ws {
		loc := w.Loc
		if loc == nil {
			loc = time.UTC
		}
		z := Zero{}
		z.Activity, z.From = effective(w.Name)
		z.Timeout, _ = TimeoutAt(now, loc, w.Idle, w.ByTime)
		// Idle when lastActivity + timeout < now (strict); never seen
		// counts as idle.
		expiry := z.Activity.Add(z.Timeout)
		z.Idle = z.Activity.IsZero() || expiry.Before(now)
		switch {
		case z.Idle:
			z.Proposed = w.Min
			z.Why = fmt.Sprintf("idle: last activity %s + timeout %s < now", stamp(z.Activity, z.From, loc), z.Timeout)
			if w.Gradual && w.Min == 0 && w.Current > 1 {
				z.Proposed = 1
				z.Why += "; down to 1 before 0 (idle.gradual)"
			}
		case w.Current == 0 || w.Current < w.Min:
			for _, d := range w.DependsOn {
				if dw, ok := byName[d]; !ok || dw.Ready <= 0 {
					z.Waiting = append(z.Waiting, d)
				}
			}
			if len(z.Waiting) > 0 {
				z.Proposed = w.Current
				z.Why = fmt.Sprintf("active (%s), waiting for %s to have ready replicas", stamp(z.Activity, z.From, loc), strings.Join(z.Waiting, ", "))
			} else {
				z.Proposed = w.AtStart
				z.Why = fmt.Sprintf("wake up to %d: active (%s) with %d replicas", w.AtStart, stamp(z.Activity, z.From, loc), w.Current)
			}
		default:
			z.Proposed = w.Current
			z.Why = fmt.Sprintf("active (%s, idle after %s)", stamp(z.Activity, z.From, loc), expiry.In(loc).Format("15:04:05"))
		}
		// When it changes by itself: the next wake-up, or the idle expiry
		// (the first instant after activity + timeout).
		next := NextWakeUp(now, loc, w.WakeUps)
		if !z.Idle && w.Current > w.Min {
			if e := expiry.Add(time.Nanosecond); next.IsZero() || e.Before(next) {
				next = e
			}
		}
		z.Due = next
		out[w.Name] = z
	}
	return out
}

func stamp(t time.Time, from string, loc *time.Location) string {
	if t.IsZero() {
		return "never"
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST") + " (" + from + ")"
}
