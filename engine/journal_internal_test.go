package engine

import (
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// TestSettleEntry: each journaled intent, settled against what a provider
// reads back, is recorded only when it happened.
func TestSettleEntry(t *testing.T) {
	o := addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}
	path := addrs.MustPath("spec.replicas")
	other := addrs.MustPath("spec.paused")
	at := time.Unix(100, 0)
	three, two := values.CountOf(3), values.CountOf(2)
	read := func(exists bool, v values.Value, manager string) providers.Object {
		x := providers.Object{Address: o, Exists: exists}
		if exists {
			x.Attributes = map[addrs.Path]values.Value{path: v, other: values.CountOf(1)}
			x.Managers = map[addrs.Path]string{path: manager}
		}
		return x
	}
	user := two
	for _, c := range []struct {
		name    string
		pending state.Pending
		applied bool // the entry had a record before
		read    providers.Object
		check   func(en *state.Entry, ok bool) string
	}{
		{"apply happened", state.Pending{Action: state.IntentApply, Value: three, By: []string{"NFR/shop/a"}, At: at}, false, read(true, three, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Applied == nil || en.Applied.Value != three || !en.Applied.At.Equal(at) || en.Applied.By[0] != "NFR/shop/a" || en.Pending != nil {
					return "want it recorded as applied, at the journal's time, for its spec"
				}
				return ""
			}},
		{"apply: same value, another manager", state.Pending{Action: state.IntentApply, Value: three}, false, read(true, three, "kubectl"),
			func(en *state.Entry, ok bool) string {
				if ok && (en.Applied != nil || en.Pending != nil) {
					return "a value under another manager is not setpoint's"
				}
				return ""
			}},
		{"apply did not happen", state.Pending{Action: state.IntentApply, Value: three}, false, read(true, two, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if ok && (en.Applied != nil || en.Pending != nil) {
					return "nothing to record; the mark goes"
				}
				return ""
			}},
		{"create happened", state.Pending{Action: state.IntentApply, Value: three, Create: map[string]values.Value{"spec.paused": values.CountOf(1)}}, false, read(true, three, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Applied == nil {
					return "want the created attribute recorded"
				}
				return ""
			}},
		{"release happened", state.Pending{Action: state.IntentRelease, Value: three, By: []string{"NFR/shop/a"}, At: at}, true, read(true, three, ""),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Released == nil || en.Released.Value != three || en.Applied != nil || en.Released.User == nil || *en.Released.User != two {
					return "want a tombstone with setpoint's value and the user's"
				}
				return ""
			}},
		{"release did not happen", state.Pending{Action: state.IntentRelease, Value: three}, true, read(true, three, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Applied == nil || en.Released != nil || en.Pending != nil {
					return "still setpoint's: the record stays, the mark goes"
				}
				return ""
			}},
		{"restore happened", state.Pending{Action: state.IntentRestore, Value: two}, true, read(true, two, ""),
			func(en *state.Entry, ok bool) string {
				if ok {
					return "the user's value is back: the entry goes"
				}
				return ""
			}},
		{"restore happened, handed back to another manager", state.Pending{Action: state.IntentRestore, Value: two}, true, read(true, two, "setpoint-released"),
			func(en *state.Entry, ok bool) string {
				if ok {
					return "the user's value is back, whoever owns it: the entry goes"
				}
				return ""
			}},
		{"restore happened, still setpoint's", state.Pending{Action: state.IntentRestore, Value: two, By: []string{"NFR/shop/a"}, At: at}, true, read(true, two, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Applied == nil || en.Applied.Value != two || en.Pending != nil {
					return "still setpoint's: recorded as applied with the user's value (never dropped, never the stale record)"
				}
				return ""
			}},
		{"restore did not happen", state.Pending{Action: state.IntentRestore, Value: two}, true, read(true, three, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Applied == nil || en.Pending != nil {
					return "the record stays, the mark goes"
				}
				return ""
			}},
		{"delete happened", state.Pending{Action: state.IntentDelete}, true, read(false, values.Value{}, ""),
			func(en *state.Entry, ok bool) string {
				if ok {
					return "the object is gone: so is its entry"
				}
				return ""
			}},
		{"delete did not happen", state.Pending{Action: state.IntentDelete}, true, read(true, three, "setpoint"),
			func(en *state.Entry, ok bool) string {
				if !ok || en.Applied == nil || en.Pending != nil {
					return "the object is there: the record stays"
				}
				return ""
			}},
	} {
		st := state.New()
		attr := addrs.Attr{Object: o, Path: path}
		en := st.Entry(attr)
		en.User = &user
		if c.applied {
			en.Applied = &state.Applied{Value: three, At: at.Add(-time.Hour), By: []string{"NFR/shop/a"}}
		}
		pd := c.pending
		en.Pending = &pd
		settleEntry(st, o, path.String(), en, c.read)
		got, ok := st.Lookup(attr)
		if why := c.check(got, ok); why != "" {
			t.Errorf("%s: %s; got %+v", c.name, why, got)
		}
		if c.name == "create happened" {
			if p, ok := st.Lookup(addrs.Attr{Object: o, Path: other}); !ok || p.Applied == nil || p.Applied.Value != values.CountOf(1) {
				t.Errorf("create: the object's other attribute must be recorded as setpoint's: %+v", p)
			}
		}
	}
}
