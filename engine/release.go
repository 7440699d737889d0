package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/intent"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// A spec that disappears from the directory releases the fields it set,
// as Argo CD's prune safety would have it:
//   - the values stay: setpoint stops managing the fields (the provider
//     hands them back) and keeps a tombstone of each (what it wrote and
//     the user's value that write replaced), so a spec that comes back
//     adopts the user's value, not setpoint's own. A user who wants their
//     values back turns enforcement off first (the plan then restores
//     them) and deletes the spec after;
//   - no object is ever deleted because a spec disappeared;
//   - while any spec file fails to load, nothing is released: a broken
//     spec cannot be told from a deleted one;
//   - when more than half of the specs setpoint applied for are gone
//     (an empty or partial checkout), nothing is released until the
//     deletion is confirmed (setpoint state confirm-release, one shot).
//     "Gone" is judged against every spec setpoint applied for since the
//     last confirmation, released ones included (their tombstones), so
//     deleting specs one at a time does not slip past the guard.

// guardSets are the specs the vanished-specs guard judges by: known is
// every spec setpoint applied for since the last confirmation, gone those
// of them no longer in force and not confirmed deleted.
func guardSets(st *state.State, live map[string]bool) (known, gone map[string]bool) {
	known, gone = map[string]bool{}, map[string]bool{}
	confirmed := map[string]bool{}
	st.Each(func(_ addrs.Object, so *state.Object) {
		for _, en := range so.Attrs {
			if en == nil {
				continue
			}
			if a := en.Applied; a != nil {
				// An attribute a live spec still sets is not released: its
				// other specs are not counted gone (nor can they be
				// confirmed) until they stop sharing it.
				alive := slices.ContainsFunc(a.By, func(id string) bool { return live[id] })
				for _, id := range a.By {
					known[id] = true
					switch {
					case alive:
					case en.ReleaseConfirmed:
						confirmed[id] = true
					default:
						gone[id] = true
					}
				}
			}
			if r := en.Released; r != nil && !r.Confirmed {
				for _, id := range r.By {
					known[id] = true
					if !live[id] {
						gone[id] = true
					}
				}
			}
		}
	})
	// A spec confirmed deleted in one entry is confirmed everywhere.
	for id := range confirmed {
		delete(gone, id)
	}
	return known, gone
}

// ConfirmGone records that the specs in confirm (those of them not in
// live) were deleted on purpose: what they applied is marked confirmed
// (its release passes the guard) and their tombstones stop counting toward
// it. A spec in live is never confirmed gone.
func ConfirmGone(st *state.State, live, confirm map[string]bool) {
	gone := func(ids []string) bool {
		if len(ids) == 0 {
			return false
		}
		for _, id := range ids {
			if live[id] || !confirm[id] {
				return false
			}
		}
		return true
	}
	st.Each(func(_ addrs.Object, so *state.Object) {
		for _, en := range so.Attrs {
			if en == nil {
				continue
			}
			if en.Applied != nil && gone(en.Applied.By) {
				en.ReleaseConfirmed = true
			}
			if r := en.Released; r != nil && gone(r.By) {
				r.Confirmed = true
			}
		}
	})
}

// Gone lists the specs the guard counts as gone: setpoint applied for
// them, they are not in live, and their deletion was not confirmed.
func Gone(st *state.State, live map[string]bool) []string {
	_, gone := guardSets(st, live)
	return slices.Sorted(maps.Keys(gone))
}

// releases adds to p a release of every field whose applied value was set
// only by specs no longer in force, whatever the plan's focus (so a release
// held or cut off is planned again by the next reconcile).
//
// A field a live spec acts on in this plan (a spec renamed, or another
// taking over) is not released: the live spec's next apply takes it over
// in the state (Applied.By), and the user's value recorded at adoption
// stays.
func (e *Engine) releases(ctx context.Context, now time.Time, p *plan.Plan, st *state.State, intents []intent.Intent, obs Observation) {
	live := map[string]bool{}
	for _, d := range e.Specs {
		live[d.Head().ID()] = true
	}
	if len(e.ConfirmGone) > 0 && !e.Incomplete {
		ConfirmGone(st, live, e.ConfirmGone)
		// Taken: it is in the state now (the caller's save keeps it).
		e.ConfirmGone = nil
	}
	wanted := map[addrs.Attr]bool{}
	for _, it := range intents {
		wanted[it.Attr] = true
	}
	type orphan struct {
		attr addrs.Attr
		en   *state.Entry
	}
	var orphans []orphan
	// In any order: the plan sorts its changes and holds.
	st.Each(func(o addrs.Object, so *state.Object) {
		for k, en := range so.Attrs {
			if en == nil || en.Applied == nil || len(en.Applied.By) == 0 || en.Pending != nil {
				continue
			}
			if slices.ContainsFunc(en.Applied.By, func(id string) bool { return live[id] }) {
				// A confirmed deletion that was undone confirms nothing.
				en.ReleaseConfirmed = false
				continue
			}
			path, err := addrs.ParsePath(k)
			if err != nil {
				// The apply of another change on the object reports it.
				continue
			}
			if wanted[addrs.Attr{Object: o, Path: path}] {
				continue
			}
			if e.Releases != nil && !e.Releases(en.Applied.By[0]) {
				continue // another replica's to read and release
			}
			orphans = append(orphans, orphan{addrs.Attr{Object: o, Path: path}, en})
		}
	})
	orphans = slices.DeleteFunc(orphans, func(or orphan) bool { return e.goneObject(ctx, now, p, st, or.attr, or.en.Applied.By, obs) })
	if len(orphans) == 0 {
		return
	}
	known, gone := guardSets(st, live)
	var hold *plan.Hold
	switch {
	case e.Incomplete:
		hold = &plan.Hold{Kind: plan.HoldRelease, Detail: "some spec files do not load, and a spec that does not load cannot be told from a deleted one; fix them first"}
	case 2*len(gone) > len(known):
		hold = &plan.Hold{Kind: plan.HoldRelease, Detail: fmt.Sprintf("%d of the %d specs setpoint applied for since the last confirmation are gone (%s; an empty checkout?); if they were deleted on purpose, run `setpoint state confirm-release DIR` once", len(gone), len(known), summarize(slices.Sorted(maps.Keys(gone)), 3))}
	}
	for _, or := range orphans {
		hold := hold
		if hold != nil && hold.Kind == plan.HoldRelease && !e.Incomplete && or.en.ReleaseConfirmed {
			hold = nil // confirmed deleted: the guard is for the others
		}
		if hold == nil && !e.View.sawGone(or.en.Applied.At) {
			// A copy of the directory older than the apply may simply
			// not have the spec yet (another replica applied it from a
			// newer one): not evidence of a deletion.
			hold = &plan.Hold{Kind: plan.HoldRelease, Detail: fmt.Sprintf("this process's copy of the spec directory is as of %s, not newer than the field's last apply (%s) by %s: a spec missing from it may not have reached it yet; released once a newer copy still lacks it",
				e.View.At.UTC().Format(time.RFC3339), or.en.Applied.At.UTC().Format(time.RFC3339), e.View.lag())}
		}
		by := slices.Clone(or.en.Applied.By)
		v := or.en.Applied.Value
		c := plan.Change{
			Address: or.attr.Object, Attribute: or.attr.Path, Action: action.Update, Release: true,
			From: v.String(), To: v.String(), Value: v, By: by, Spec: by[0],
			Reason: fmt.Sprintf("%s gone: the field is released and keeps setpoint's value %s; a tombstone keeps the user's value %s for a spec that comes back", strings.Join(by, ", "), brief(v), userOf(or.en)),
			Held:   hold,
		}
		if hold != nil {
			p.Held = append(p.Held, c)
		} else {
			p.Changes = append(p.Changes, c)
		}
	}
}

// goneObject says whether a released field's object no longer exists (its
// namespace deleted, say), as its provider reads it now: then there is
// nothing to hand back, and the field's state entry goes, with a note. An
// object that cannot be read is not taken for gone.
func (e *Engine) goneObject(ctx context.Context, now time.Time, p *plan.Plan, st *state.State, a addrs.Attr, by []string, obs Observation) bool {
	if e.Incomplete {
		return false // as the guard: nothing is settled while specs fail to load
	}
	o, ok := obs.Objects[a.Object]
	if _, bad := obs.Failed[a.Object]; !ok && !bad {
		e.read(ctx, now, map[string][]addrs.Object{a.Object.Provider: {a.Object}}, obs.Objects, obs.Failed)
		o, ok = obs.Objects[a.Object]
	}
	// A provider may answer "not found" beside an error (a 403, a
	// timeout): only a read that failed in nothing says the object is gone.
	if _, bad := obs.Failed[a.Object]; bad || !ok || o.Exists {
		return false
	}
	if so, ok := st.Object(a.Object); ok {
		delete(so.Attrs, a.Path.String())
	}
	p.Notes = append(p.Notes, plan.Note{Severity: diag.Info, Spec: strings.Join(by, ", "),
		Message: fmt.Sprintf("%s %s: the object is gone, so there is nothing to release; setpoint forgets what it applied there", a.Object, a.Path)})
	return true
}

// userOf names an entry's user value for a message.
func userOf(en *state.Entry) string {
	if en.User == nil {
		return "(none recorded)"
	}
	return brief(*en.User)
}

// summarize names the first n of ids and how many more.
func summarize(ids []string, n int) string {
	if len(ids) > n {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
	}
	return strings.Join(ids, ", ")
}

// tombstone turns an applied entry into its release's tombstone: the user's
// value and setpoint's write are kept, the gate's state and the journal go.
func tombstone(en *state.Entry, now time.Time) {
	r := &state.Released{At: now, Confirmed: en.ReleaseConfirmed}
	if en.Applied != nil {
		r.Value, r.By = en.Applied.Value, slices.Clone(en.Applied.By)
	}
	if en.User != nil {
		u := *en.User
		r.User = &u
	}
	*en = state.Entry{Released: r}
}

// readopt sets a returning spec's user value from a tombstone: if the
// attribute still holds what setpoint wrote, the user's value is the one
// that write replaced (setpoint's own value is never adopted as the
// user's); if someone changed it since, that change is the user's. It
// returns a note for the plan, "" when there was no tombstone.
func readopt(en *state.Entry, cur values.Value) string {
	r := en.Released
	if r == nil {
		return ""
	}
	en.Released = nil
	if cur == r.Value && r.User != nil {
		u := *r.User
		en.User = &u
		return fmt.Sprintf("adopted again after a release: the user's value is %s, from before the release (%s is setpoint's own write)", brief(u), brief(cur))
	}
	if cur == r.Value {
		// setpoint set it on an object it created: there is no user value,
		// and what is there is setpoint's own write.
		en.Applied = &state.Applied{Value: r.Value, At: r.At, By: slices.Clone(r.By)}
		return fmt.Sprintf("adopted again after a release: %s is setpoint's own write on an object it created (no user value)", brief(cur))
	}
	v := cur
	en.User = &v
	return fmt.Sprintf("adopted again after a release: the user's value is %s (changed since setpoint's %s)", brief(cur), brief(r.Value))
}
