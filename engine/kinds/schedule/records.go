package schedulekind

import (
	"encoding/json"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// What a Schedule keeps in the state entry of the attribute it writes,
// beside its gate policy's windows and log: when it adopted the workload
// (the grace period runs from it) and the last activity it saw (a
// restarted process, or a store that has not refilled its history, does
// not take an active workload for idle). Both are written only while the
// Schedule enforces: observe mode writes nothing. Each names the spec
// that kept it, so a Schedule never inherits another's: two Schedules on
// one target do not validate, so records of another spec are a deleted
// one's, dropped by the next Schedule that enforces on the target. A
// spec that is deleted after it applied something goes with its fields'
// release, which forgets the whole entry.
const (
	adoptedKey  = "schedule.adopted"
	activityKey = "schedule.activity"
)

// record is one such time and the spec that kept it. A record written
// before records named their spec is a bare time (By "").
type record struct {
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// readRecord returns the record under key for the attribute.
func readRecord(st *state.State, a addrs.Attr, key string) (record, bool) {
	e, ok := st.Lookup(a)
	if !ok {
		return record{}, false
	}
	b, ok := e.Policy[key]
	if !ok {
		return record{}, false
	}
	var r record
	if json.Unmarshal(b, &r) == nil && !r.At.IsZero() {
		return r, true
	}
	if json.Unmarshal(b, &r.At) == nil && !r.At.IsZero() {
		return record{At: r.At}, true
	}
	return record{}, false
}

// own returns the time under key if the spec id kept it (or it predates
// records naming their spec).
func own(st *state.State, a addrs.Attr, key, id string) (time.Time, bool) {
	r, ok := readRecord(st, a, key)
	if !ok || (r.By != "" && r.By != id) {
		return time.Time{}, false
	}
	return r.At, true
}

func writeRecord(st *state.State, a addrs.Attr, key, id string, at time.Time) {
	e := st.Entry(a)
	if e.Policy == nil {
		e.Policy = map[string]json.RawMessage{}
	}
	b, _ := json.Marshal(record{At: at.UTC(), By: id})
	e.Policy[key] = b
}

// remembered is the last activity the spec id kept for the attribute.
func remembered(st *state.State, a addrs.Attr, id string) time.Time {
	at, _ := own(st, a, activityKey, id)
	return at
}

// recordActivity keeps the later of at and what the state has.
func recordActivity(st *state.State, a addrs.Attr, id string, at time.Time) {
	if !at.IsZero() && at.After(remembered(st, a, id)) {
		writeRecord(st, a, activityKey, id, at)
	}
}

// adoption returns when the spec id adopted the attribute: what it kept,
// or now, kept if it enforces (observe mode adopts nothing: a plan in it
// shows what enforcing from now would do).
func adoption(st *state.State, a addrs.Attr, id string, now time.Time, enforcing bool) time.Time {
	if at, ok := own(st, a, adoptedKey, id); ok {
		return at
	}
	if enforcing {
		writeRecord(st, a, adoptedKey, id, now)
	}
	return now
}

// claim drops what another spec kept for the attribute (a deleted
// Schedule's, whose target this one took): its times, and the windows
// and log of its gate policy, which another behavior may not share.
func claim(st *state.State, a addrs.Attr, id string) {
	e, ok := st.Lookup(a)
	if !ok {
		return
	}
	foreign := false
	for _, key := range []string{adoptedKey, activityKey} {
		if r, ok := readRecord(st, a, key); ok && r.By != "" && r.By != id {
			foreign = true
		}
	}
	if foreign {
		for _, key := range []string{adoptedKey, activityKey, PolicyName} {
			delete(e.Policy, key)
		}
	}
}

// forget drops the spec's own times (enforcement turned off: it no
// longer manages the workload; the restore forgets the rest).
func forget(st *state.State, a addrs.Attr, id string) {
	e, ok := st.Lookup(a)
	if !ok {
		return
	}
	for _, key := range []string{adoptedKey, activityKey} {
		if _, mine := own(st, a, key, id); mine {
			delete(e.Policy, key)
		}
	}
}
