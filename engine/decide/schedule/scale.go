package schedule

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// TriggerType says how a trigger's value sizes the workload.
type TriggerType string

// Trigger types, as KEDA and the HPA name them.
const (
	// AverageValue: the value is a total to share, target per pod:
	// ceil(total / target).
	AverageValue TriggerType = "AverageValue"
	// Value: the value is compared with the target as a whole:
	// ceil(max(current, 1) × value / target).
	Value TriggerType = "Value"
)

// Trigger is one metric that sizes the workload.
type Trigger struct {
	Name   string
	Type   TriggerType
	Target float64
}

// Reading is a trigger's value now; OK false when there was none.
type Reading struct {
	Value float64
	OK    bool
	// Err is why its query failed, when it did rather than find no data:
	// a query past a bound is the spec's to fix, which "missing" hides.
	Err string
}

// usable reports whether a reading can size anything: present, finite,
// not negative.
func (r Reading) usable() bool {
	return r.OK && !math.IsNaN(r.Value) && !math.IsInf(r.Value, 0) && r.Value >= 0
}

// Recommend is the N→M recommendation from the triggers at current
// replicas: per trigger its own count (within the tolerance of the
// target, the current count), the max over them. A trigger without a
// usable value blocks a decrease (the result is at least current) but
// not an increase; with none usable, current stays. why says each
// trigger's value against its target.
func Recommend(current int, triggers []Trigger, readings []Reading, tolerance float64) (rec int, why string) {
	rec = -1
	blocked := false
	var parts []string
	for i, t := range triggers {
		var r Reading
		if i < len(readings) {
			r = readings[i]
		}
		if !r.usable() || t.Target <= 0 {
			blocked = true
			parts = append(parts, fmt.Sprintf("%s: no usable value (%s): no decrease", t.Name, describe(r)))
			continue
		}
		var n int
		var ratio float64
		switch t.Type {
		case Value:
			ratio = r.Value / t.Target
			n = count(float64(max(current, 1)) * ratio)
		default: // AverageValue
			if current > 0 {
				ratio = r.Value / float64(current) / t.Target
			} else {
				ratio = math.Inf(1)
			}
			n = count(r.Value / t.Target)
		}
		if current > 0 && math.Abs(ratio-1) <= tolerance {
			n = current
			parts = append(parts, fmt.Sprintf("%s: %s against target %s: within %s of it, %d", t.Name, num(r.Value), num(t.Target), pct(tolerance), n))
		} else {
			parts = append(parts, fmt.Sprintf("%s: %s against target %s (%s): %d", t.Name, num(r.Value), num(t.Target), t.Type, n))
		}
		rec = max(rec, n)
	}
	switch {
	case rec < 0:
		rec = current
	case blocked && rec < current:
		rec = current
	}
	return rec, strings.Join(parts, "; ")
}

// maxCount bounds a recommendation before it becomes an int: a huge
// value (or a tiny target) is "as many as allowed", never an overflow.
const maxCount = 1 << 30

func count(f float64) int {
	if f >= maxCount {
		return maxCount
	}
	return int(math.Ceil(f))
}

func describe(r Reading) string {
	switch {
	case !r.OK && r.Err != "":
		return r.Err
	case !r.OK:
		return "missing"
	case math.IsNaN(r.Value):
		return "NaN"
	case math.IsInf(r.Value, 0):
		return "Inf"
	}
	return num(r.Value)
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.3g", f)
}

func pct(f float64) string { return fmt.Sprintf("%g%%", f*100) }

// PolicyType is what a policy's value counts.
type PolicyType string

// Policy types, as the HPA's.
const (
	Pods    PolicyType = "Pods"
	Percent PolicyType = "Percent"
)

// Policy bounds a change within a period.
type Policy struct {
	Type   PolicyType
	Value  int
	Period time.Duration
}

// Select picks among policies.
type Select string

// Selections: Max allows the largest change, Min the smallest; Disabled
// allows none in that direction.
const (
	SelectMax      Select = "Max"
	SelectMin      Select = "Min"
	SelectDisabled Select = "Disabled"
)

// Rules are one direction's behavior.
type Rules struct {
	Stabilization time.Duration
	Select        Select
	// Policies: none is no limit.
	Policies []Policy
}

// Event is a change of replicas setpoint made: Delta > 0 up, < 0 down.
type Event struct {
	At    time.Time `json:"at"`
	Delta int       `json:"delta"`
}

// Recommendation is one tick's raw recommendation, kept for the
// stabilization windows.
type Recommendation struct {
	At       time.Time `json:"at"`
	Replicas int       `json:"replicas"`
}

// Stabilize applies the stabilization windows as the HPA does: over the
// recommendations within the scale-up window (and this one) the minimum
// is the most it may rise to, within the scale-down window the maximum is
// the least it may fall to. A target with no recommendations yet (just
// adopted, or just woken: the windows start afresh) first gets its
// current count recorded at now, as the HPA's controller records it for
// an HPA it has not seen: without it, a first scale-down would not wait
// out the scale-down window the count it runs at has not been through.
// It returns the stabilized count and the history to keep (this
// recommendation added, what is older than both windows dropped). The
// HPA instead overwrites one stale entry and leaves the rest, which
// count again only once a window is lengthened, and then as its slot
// reuse happened to leave them: dropped, a lengthened window fills from
// the edit on.
func Stabilize(now time.Time, current, desired int, up, down time.Duration, history []Recommendation) (int, []Recommendation) {
	if len(history) == 0 {
		history = []Recommendation{{At: now, Replicas: current}}
	}
	upRec, downRec := desired, desired
	upCut, downCut := now.Add(-up), now.Add(-down)
	for _, r := range history {
		if r.At.After(upCut) {
			upRec = min(upRec, r.Replicas)
		}
		if r.At.After(downCut) {
			downRec = max(downRec, r.Replicas)
		}
	}
	out := current
	if out < upRec {
		out = upRec
	}
	if out > downRec {
		out = downRec
	}
	keep := make([]Recommendation, 0, len(history)+1)
	oldest := upCut
	if downCut.Before(oldest) {
		oldest = downCut
	}
	for _, r := range history {
		if r.At.After(oldest) {
			keep = append(keep, r)
		}
	}
	keep = append(keep, Recommendation{At: now, Replicas: desired})
	return out, keep
}

// changeWithin is the net change the events made within period before
// now, both directions counted (ups add, downs subtract): the replicas at
// the start of the period are current − changeWithin, as the HPA counts
// them. Counting one direction only would take a scale-up undone by a
// scale-down in the period for a scale-up still spent.
func changeWithin(now time.Time, period time.Duration, events []Event) int {
	n := 0
	cut := now.Add(-period)
	for _, e := range events {
		if e.At.After(cut) {
			n += e.Delta
		}
	}
	return n
}

// Limit bounds a change from current towards desired by one direction's
// policies, as the HPA does: each policy allows, from the replicas at the
// start of its period (current − the net change made within the period,
// ups and downs alike), Pods more (or fewer) or Percent more (fewer; a
// Percent rounded up going up, truncated going down, as the HPA rounds);
// Select picks the policy allowing the largest change (Max) or the
// smallest (Min); Disabled allows none. It returns the bounded count and which policy
// bound it ("" when none did).
func Limit(now time.Time, current, desired int, rules Rules, events []Event) (int, string) {
	if desired == current {
		return desired, ""
	}
	up := desired > current
	if rules.Select == SelectDisabled {
		dir := "down"
		if up {
			dir = "up"
		}
		return current, "scale " + dir + " disabled"
	}
	if len(rules.Policies) == 0 {
		return desired, ""
	}
	limit := 0
	bound := ""
	first := true
	for _, p := range rules.Policies {
		start := current - changeWithin(now, p.Period, events)
		var proposed int
		if up {
			if p.Type == Pods {
				proposed = start + p.Value
			} else {
				proposed = int(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
			}
		} else {
			if p.Type == Pods {
				proposed = start - p.Value
			} else {
				proposed = int(float64(start) * (1 - float64(p.Value)/100))
			}
		}
		name := fmt.Sprintf("%s %d per %s", p.Type, p.Value, p.Period)
		// Max: the policy allowing the largest change; Min: the smallest.
		largest := rules.Select != SelectMin
		better := first ||
			(up && largest && proposed > limit) || (up && !largest && proposed < limit) ||
			(!up && largest && proposed < limit) || (!up && !largest && proposed > limit)
		if better {
			limit, bound = proposed, name
		}
		first = false
	}
	if up {
		limit = max(limit, current) // a policy never forces a decrease
		if desired > limit {
			return limit, bound
		}
		return desired, ""
	}
	limit = min(limit, current)
	if desired < limit {
		return limit, bound
	}
	return desired, ""
}

// Behavior is both directions' rules.
type Behavior struct {
	Up, Down Rules
}

// History is what the N→M decision keeps between ticks (in the gate
// policy's state, so a restart keeps it).
type History struct {
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	Events          []Event          `json:"events,omitempty"`
}

// maxKept bounds the history whatever the windows and periods.
const maxKept = 1000

// Scale turns a raw recommendation into the replicas to run now, as the
// HPA does: stabilized, then bounded by the direction's policies, then
// by min and max. It returns the new history (the event of this change
// is added by Applied, once it is applied) and why.
func Scale(now time.Time, current, desired, minR, maxR int, b Behavior, h History) (int, History, string) {
	stab, recs := Stabilize(now, current, desired, b.Up.Stabilization, b.Down.Stabilization, h.Recommendations)
	if len(recs) > maxKept {
		recs = recs[len(recs)-maxKept:]
	}
	why := fmt.Sprintf("raw %d", desired)
	if stab != desired {
		why += fmt.Sprintf(", stabilized %d", stab)
	}
	rules := b.Down
	if stab > current {
		rules = b.Up
	}
	out, bound := Limit(now, current, stab, rules, h.Events)
	if bound != "" {
		why += fmt.Sprintf(", %d by policy %s", out, bound)
	}
	if out > maxR {
		out = maxR
		why += fmt.Sprintf(", max %d", maxR)
	}
	if out < minR {
		out = minR
		why += fmt.Sprintf(", min %d", minR)
	}
	return out, History{Recommendations: recs, Events: KeepEvents(now, h.Events, b)}, why
}

// Applied records a change that was made.
func Applied(now time.Time, from, to int, h History) History {
	if from != to {
		h.Events = append(h.Events, Event{At: now, Delta: to - from})
	}
	if len(h.Events) > maxKept {
		h.Events = h.Events[len(h.Events)-maxKept:]
	}
	return h
}

// KeepEvents drops events older than every policy's period, of both
// directions: a period's start count reads the changes of both. (The
// HPA overwrites an event past its own direction's longest period, when
// the other direction's may still hold it.)
func KeepEvents(now time.Time, events []Event, b Behavior) []Event {
	var longest time.Duration
	for _, r := range []Rules{b.Up, b.Down} {
		for _, p := range r.Policies {
			longest = max(longest, p.Period)
		}
	}
	var out []Event
	for _, e := range events {
		if e.At.After(now.Add(-longest)) {
			out = append(out, e)
		}
	}
	return out
}

// Want is the replicas the two systems together want before the
// behavior bounds them, as the design says: only the 0→N decision moves
// a workload from 0 (metrics run only while it has replicas); while
// active, max(metrics, atStart); while idle, max(min, metrics), so
// metrics veto scale-to-zero (at least 1 while they want capacity);
// always within [min, max]. rec < 0 means no triggers.
func Want(z Zero, current, minR, maxR, atStart, rec int) (int, string) {
	if current == 0 || rec < 0 {
		return min(z.Proposed, maxR), z.Why
	}
	if z.Idle {
		out := max(z.Proposed, rec)
		why := z.Why
		if minR == 0 && rec > 0 {
			why += fmt.Sprintf("; idle, but the triggers want %d: they veto scale to zero", rec)
		}
		return min(out, maxR), why
	}
	out := max(rec, atStart, minR)
	why := z.Why
	if out != rec {
		why += fmt.Sprintf("; at least atStart %d while active", atStart)
	}
	return min(out, maxR), why
}

// Input is one workload's whole decision at now.
type Input struct {
	Now time.Time
	// Zero is its 0→N decision (DecideZero).
	Zero     Zero
	Current  int
	Min, Max int
	AtStart  int
	Triggers []Trigger
	Readings []Reading
	// Tolerance is the band around a target within which nothing moves.
	Tolerance float64
	Behavior  Behavior
	History   History
}

// Decide is the whole decision for one workload: Want from the 0→N
// decision and the triggers' recommendation, then, between two non-zero
// counts, the behavior (stabilization and policies). A move from or to
// 0 is the 0→N decision's own and is not bounded by the behavior.
func Decide(in Input) (int, History, string) {
	rec := -1
	why := ""
	if in.Current > 0 && len(in.Triggers) > 0 {
		var trig string
		rec, trig = Recommend(in.Current, in.Triggers, in.Readings, in.Tolerance)
		why = "; triggers: " + trig
	}
	want, zwhy := Want(in.Zero, in.Current, in.Min, in.Max, in.AtStart, rec)
	if rec < 0 || want == 0 {
		return want, in.History, zwhy + why
	}
	out, h, how := Scale(in.Now, in.Current, want, in.Min, in.Max, in.Behavior, in.History)
	return out, h, zwhy + why + "; " + how
}

// Compact shortens a window's history without changing what Stabilize
// makes of it: a recommendation matters only while it can be the largest
// of the scale-down window or the smallest of the scale-up window, that
// is, while no later one is at least as large (resp. at least as small):
// a later one stays in every window at least as long. What is left is a
// descending and an ascending run, at most two entries per count. Past
// maxN entries (counts over thousands of values), the oldest go.
func Compact(recs []Recommendation, maxN int) []Recommendation {
	keep := make([]bool, len(recs))
	hi, lo := math.MinInt, math.MaxInt // over the later entries
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i].Replicas
		if r > hi || r < lo {
			keep[i] = true
		}
		hi, lo = max(hi, r), min(lo, r)
	}
	out := recs[:0:0]
	for i, r := range recs {
		if keep[i] {
			out = append(out, r)
		}
	}
	if len(out) > maxN {
		out = out[len(out)-maxN:]
	}
	return out
}

// CompactEvents bounds a change log to maxN events, merging the oldest
// pair of same-direction neighbours into the later one's time; with none,
// the oldest goes. Past the bound the log is approximate: until the later
// event leaves a period, the merged change counts in it for longer than
// the earlier one would have, so more against a further change in its
// direction (never a faster pace than the policies allow) and less
// against a reversal. The oldest pair is merged because its inexactness
// ends soonest.
func CompactEvents(events []Event, maxN int) []Event {
	out := append(events[:0:0], events...)
	for len(out) > maxN {
		merged := false
		for i := 0; i+1 < len(out); i++ {
			if (out[i].Delta > 0) == (out[i+1].Delta > 0) {
				out[i+1].Delta += out[i].Delta
				out = append(out[:i], out[i+1:]...)
				merged = true
				break
			}
		}
		if !merged {
			out = out[1:]
		}
	}
	return out
}
