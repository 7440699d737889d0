package engine

import (
	"encoding/json"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
)

// A decider may keep a time in an attribute's state entry, under a key of
// its own beside the gate policies' (when a Schedule adopted a workload,
// when a cluster became empty): what it must remember across runs and
// restarts, and nothing else.

// TimeNoted returns the time kept under key for the attribute.
func TimeNoted(st *state.State, a addrs.Attr, key string) (time.Time, bool) {
	var at time.Time
	e, ok := st.Lookup(a)
	if !ok {
		return at, false
	}
	b, ok := e.Policy[key]
	if !ok || json.Unmarshal(b, &at) != nil {
		return time.Time{}, false
	}
	return at, true
}

// NoteTime keeps at under key for the attribute.
func NoteTime(st *state.State, a addrs.Attr, key string, at time.Time) {
	e := st.Entry(a)
	if e.Policy == nil {
		e.Policy = map[string]json.RawMessage{}
	}
	b, _ := json.Marshal(at.UTC())
	e.Policy[key] = b
}

// FirstNoted returns the time kept under key, keeping now if there is
// none.
func FirstNoted(st *state.State, a addrs.Attr, key string, now time.Time) time.Time {
	if at, ok := TimeNoted(st, a, key); ok {
		return at
	}
	NoteTime(st, a, key, now)
	return now
}

// ForgetTime drops what key kept for the attribute.
func ForgetTime(st *state.State, a addrs.Attr, key string) {
	if e, ok := st.Lookup(a); ok && e.Policy[key] != nil {
		delete(st.Entry(a).Policy, key)
	}
}
