package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// recorder keeps what Apply was asked.
type recorder struct {
	*sim.Provider
	applied []providers.ObjectChange
}

func (r *recorder) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	r.applied = append(r.applied, req.Changes...)
	return r.Provider.Apply(ctx, req)
}

// PlanChange warns of a release, as a provider whose release has an
// effect (a route group stops routing) does.
func (r *recorder) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	resp := r.Provider.PlanChange(ctx, req)
	for _, c := range req.Changes {
		if len(c.Released) > 0 {
			a := c.Address
			resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &a, Message: "releasing it stops what it did"})
		}
	}
	return resp
}

// releases are a plan's releases, those to apply and those held.
func releases(pl *plan.Plan) (through, held []plan.Change) {
	for _, c := range pl.Changes {
		if c.Release {
			through = append(through, c)
		}
	}
	for _, c := range pl.Held {
		if c.Release {
			held = append(held, c)
		}
	}
	return through, held
}

// TestDeletedSpecReleases: a field whose every setter is gone is released
// (value kept, state forgotten, the provider told), never while specs fail
// to load, and not when more than half of the specs vanish at once unless
// confirmed; a field another live spec still sets stays owned.
func TestDeletedSpecReleases(t *testing.T) {
	e, p := world(t, plainWL, nfr("plain", ""), toyDoc("8"))
	rec := &recorder{Provider: p}
	e.Providers["sim"] = rec
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	replicas := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "plain"}, Path: addrs.MustPath("spec.replicas")}
	pl := e.Plan(ctx, now, st, nil)
	if res := e.Apply(ctx, now, pl, st); len(res) == 0 || res[0].Err != "" {
		t.Fatalf("apply: %+v\n%s", res, text(pl))
	}
	if en, ok := st.Lookup(replicas); !ok || !slices.Equal(en.Applied.By, []string{"NFR/shop/plain", "Toy/shop/floor"}) {
		t.Fatalf("state: %+v", en)
	}
	nfrDoc, toy := e.Specs[0], e.Specs[1]
	if toy.Head().Kind != "Toy" {
		nfrDoc, toy = toy, nfrDoc
	}
	// The Toy goes: the NFR still sets replicas, so nothing is released.
	e.Specs = append(e.Specs[:0:0], nfrDoc)
	if r, h := releases(e.Plan(ctx, now.Add(time.Minute), st, nil)); len(r)+len(h) > 0 {
		t.Fatalf("released a field a live spec sets: %+v %+v", r, h)
	}

	// Both go: 2 of the 2 specs the state knows vanished at once — held.
	e.Specs = nil
	pl = e.Plan(ctx, now.Add(time.Minute), st, nil)
	r, h := releases(pl)
	if len(r) != 0 || len(h) != 1 || h[0].Held.Kind != plan.HoldRelease || !strings.Contains(h[0].Held.String(), "2 of the 2 specs") {
		t.Fatalf("a mass release must wait for confirmation:\n%s", text(pl))
	}
	// Spec files that fail to load: held, whatever the count.
	e.Incomplete, e.ConfirmGone = true, map[string]bool{"NFR/shop/plain": true, "Toy/shop/floor": true}
	pl = e.Plan(ctx, now.Add(time.Minute), st, nil)
	if r, h := releases(pl); len(r) != 0 || len(h) != 1 || !strings.Contains(h[0].Held.String(), "do not load") {
		t.Fatalf("no release while specs fail to load:\n%s", text(pl))
	}

	// Confirmed: released; the value stays, the provider is told, the
	// state forgets the field.
	e.Incomplete = false
	pl = e.Plan(ctx, now.Add(time.Minute), st, nil)
	r, _ = releases(pl)
	if len(r) != 1 || r[0].To != "8" || !strings.Contains(text(pl), "spec.replicas: 8 (released: setpoint stops managing it; the value stays)") ||
		!strings.Contains(text(pl), "1 to release") {
		t.Fatalf("want the release:\n%s", text(pl))
	}
	if len(pl.Notes) != 1 || pl.Notes[0].Message != "releasing it stops what it did" || pl.Notes[0].Spec != "NFR/shop/plain" {
		t.Fatalf("the provider's warning of the release, on the spec that set it: %+v", pl.Notes)
	}
	rec.applied = nil
	if res := e.Apply(ctx, now.Add(time.Minute), pl, st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("apply: %+v", res)
	}
	if len(rec.applied) != 1 || !slices.Equal(rec.applied[0].Released, []addrs.Path{replicas.Path}) || len(rec.applied[0].Changed) != 0 {
		t.Fatalf("the provider was asked: %+v", rec.applied)
	}
	if _, has := rec.applied[0].Attributes[replicas.Path]; has {
		t.Fatalf("a released field is not sent as a value: %+v", rec.applied[0])
	}
	if en, ok := st.Lookup(replicas); !ok || en.Applied != nil || en.User != nil || en.Released == nil || en.Released.Value != values.CountOf(8) || !en.Released.Confirmed {
		t.Fatalf("the state must keep only a confirmed tombstone of the released field: %+v", en)
	}
	read := p.Read(ctx, providers.ReadRequest{Now: now.Add(time.Minute), Addresses: []addrs.Object{replicas.Object}})
	if o := read.Objects[0]; !o.Exists || o.Attributes[replicas.Path] != values.CountOf(8) {
		t.Fatalf("the value must stay and the object too: %+v", o)
	} else if m := o.Managers[replicas.Path]; m != "" {
		t.Fatalf("the field is still managed, by %q", m)
	}
	// Nothing left to release.
	if r, h := releases(e.Plan(ctx, now.Add(2*time.Minute), st, nil)); len(r)+len(h) > 0 {
		t.Fatalf("released twice: %+v %+v", r, h)
	}
}

// TestAmbiguousQueryIsAnErrorAtItsField: a spec's own query answering
// several series where one is expected is an error naming the field's
// position, not a silent hold.
func TestAmbiguousQueryIsAnErrorAtItsField(t *testing.T) {
	e, p := world(t, plainWL+checkout(""), nfr("plain", "  signals: {rps: 'sum by (app) (rate(http_requests_total[1m]))'}\n"))
	pl := e.Plan(context.Background(), at(p, 10*time.Minute), state.New(), nil)
	for _, n := range pl.Errors {
		if strings.Contains(n.Message, "spec.signals.rps: the query answers 2 series where one is expected") && n.Pos.Line == 10 {
			return
		}
	}
	t.Fatalf("want an error at spec.signals.rps (line 10):\n%s", text(pl))
}

// TestRenamedSpecTakesOver: a spec renamed (or replaced by another on the
// same field) is not a deletion of the field: nothing is released, the
// user's value recorded at adoption stays, and an edit in the same go is
// planned as a change, not held.
func TestRenamedSpecTakesOver(t *testing.T) {
	e, p := world(t, plainWL, toyDoc("8"))
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	replicas := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "plain"}, Path: addrs.MustPath("spec.replicas")}
	if res := e.Apply(ctx, now, e.Plan(ctx, now, st, nil), st); len(res) != 1 || res[0].Err != "" {
		t.Fatalf("apply: %+v", res)
	}
	for _, to := range []string{"8", "9"} {
		renamed := e.Specs[0].(*toy)
		cp := *renamed
		cp.Metadata.Name = "floor-" + to
		fmt.Sscan(to, &cp.Spec.Replicas)
		e.Specs = []spec.Document{&cp}
		pl := e.Plan(ctx, now.Add(time.Minute), st, nil)
		for _, c := range append(pl.Changes, pl.Held...) {
			if c.Release {
				t.Fatalf("rename to %s released the field:\n%s", to, text(pl))
			}
		}
		if to == "9" {
			if c := find(pl.Changes, "spec.replicas"); c == nil || c.To != "9" {
				t.Fatalf("the renamed, edited spec's change must go through:\n%s", text(pl))
			}
		}
		if en, _ := st.Lookup(replicas); en == nil || en.User == nil || *en.User != values.CountOf(1) {
			t.Fatalf("the user's value must stay 1: %+v", en)
		}
	}
}

// TestSlowDeletionDoesNotSlipPastTheGuard: five specs deleted one at a
// time are judged against the five setpoint applied for, released ones
// included (their tombstones): the first two are released, the third is
// held. Restored, the released fields adopt the user's value from before
// setpoint's write, never setpoint's own. A confirmation names the specs
// it confirms and lets their releases through.
func TestSlowDeletionDoesNotSlipPastTheGuard(t *testing.T) {
	var wls string
	var docs []string
	for i := 1; i <= 5; i++ {
		n := fmt.Sprint(i)
		wls += strings.ReplaceAll(plainWL, "name: plain", "name: plain"+n)
		docs = append(docs, strings.ReplaceAll(strings.ReplaceAll(toyDoc("8"), "name: floor", "name: floor"+n), "name: plain", "name: plain"+n))
	}
	e, p := world(t, wls, docs...)
	if len(e.Specs) != 5 {
		t.Fatalf("%d specs", len(e.Specs))
	}
	all := slices.Clone(e.Specs)
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	replicas := func(i int) addrs.Attr {
		return addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: fmt.Sprint("plain", i)}, Path: addrs.MustPath("spec.replicas")}
	}
	pl := e.Plan(ctx, now, st, nil)
	if res := e.Apply(ctx, now, pl, st); len(res) != 5 {
		t.Fatalf("apply: %+v\n%s", res, text(pl))
	}
	without := func(gone ...int) []spec.Document {
		var out []spec.Document
		for _, d := range all {
			if !slices.ContainsFunc(gone, func(i int) bool { return d.Head().ID() == fmt.Sprint("Toy/shop/floor", i) }) {
				out = append(out, d)
			}
		}
		return out
	}
	releases := func(pl *plan.Plan) (through, held int) {
		for _, c := range pl.Changes {
			if c.Release {
				through++
			}
		}
		for _, c := range pl.Held {
			if c.Release {
				held++
			}
		}
		return
	}
	// One at a time, each applied before the next goes.
	for i, want := range []struct{ through, held int }{{1, 0}, {1, 0}, {0, 1}} {
		now = now.Add(time.Minute)
		e.Specs = without(slices.Collect(func(yield func(int) bool) {
			for j := 1; j <= i+1; j++ {
				yield(j)
			}
		})...)
		pl = e.Plan(ctx, now, st, nil)
		through, held := releases(pl)
		if through != want.through || held != want.held {
			t.Fatalf("with %d of 5 gone: %d released, %d held; want %d, %d\n%s", i+1, through, held, want.through, want.held, text(pl))
		}
		e.Apply(ctx, now, pl, st)
	}
	if !strings.Contains(text(pl), "3 of the 5 specs setpoint applied for since the last confirmation are gone") {
		t.Fatalf("the hold must count against the five:\n%s", text(pl))
	}
	for _, i := range []int{1, 2} {
		if en, _ := st.Lookup(replicas(i)); en == nil || en.Released == nil || en.Released.Value != values.CountOf(8) || *en.Released.User != values.CountOf(1) {
			t.Fatalf("tombstone of plain%d: %+v", i, en)
		}
	}

	// All back: the released fields hold setpoint's 8; the user's value is
	// the 1 from before it, and the plan says so.
	now = now.Add(time.Minute)
	e.Specs = all
	pl = e.Plan(ctx, now, st, nil)
	for _, i := range []int{1, 2} {
		en, _ := st.Lookup(replicas(i))
		if en == nil || en.User == nil || *en.User != values.CountOf(1) || en.Released != nil {
			t.Fatalf("plain%d adopted again with user %v (want 1, not setpoint's 8): %+v", i, en.User, en)
		}
	}
	if !strings.Contains(text(pl), "the user's value is 1, from before the release (8 is setpoint's own write)") {
		t.Fatalf("the plan must say where the user's value came from:\n%s", text(pl))
	}
	e.Apply(ctx, now, pl, st)

	// Three go again: held; confirmed for those three only, released.
	now = now.Add(time.Minute)
	e.Specs = without(3, 4, 5)
	if through, held := releases(e.Plan(ctx, now, st, nil)); through != 0 || held != 3 {
		t.Fatalf("before the confirmation: %d released, %d held", through, held)
	}
	if got := engine.Gone(st, map[string]bool{"Toy/shop/floor1": true, "Toy/shop/floor2": true}); !slices.Equal(got, []string{"Toy/shop/floor3", "Toy/shop/floor4", "Toy/shop/floor5"}) {
		t.Fatalf("gone: %v", got)
	}
	e.ConfirmGone = map[string]bool{"Toy/shop/floor3": true, "Toy/shop/floor4": true, "Toy/shop/floor5": true}
	pl = e.Plan(ctx, now, st, nil)
	if through, held := releases(pl); through != 3 || held != 0 {
		t.Fatalf("confirmed: %d released, %d held\n%s", through, held, text(pl))
	}
	e.Apply(ctx, now, pl, st)
	e.ConfirmGone = nil
	// Confirmed tombstones no longer count toward the guard.
	if got := engine.Gone(st, nil); len(got) != 0 {
		t.Fatalf("confirmed deletions still counted: %v", got)
	}
	for _, i := range []int{3, 4, 5} {
		if en, _ := st.Lookup(replicas(i)); en == nil || en.Released == nil || !en.Released.Confirmed {
			t.Fatalf("plain%d: want a confirmed tombstone: %+v", i, en)
		}
	}
}

// twoToys is a world of two workloads, each with a Toy setting replicas 8,
// planned and applied once.
func twoToys(t *testing.T) (*engine.Engine, *sim.Provider, *state.State, []spec.Document) {
	t.Helper()
	var wls string
	var docs []string
	for _, n := range []string{"1", "2"} {
		wls += strings.ReplaceAll(plainWL, "name: plain", "name: plain"+n)
		docs = append(docs, strings.ReplaceAll(strings.ReplaceAll(toyDoc("8"), "name: floor", "name: floor"+n), "name: plain", "name: plain"+n))
	}
	e, p := world(t, wls, docs...)
	st := state.New()
	now := at(p, 10*time.Minute)
	pl := e.Plan(context.Background(), now, st, nil)
	if res := e.Apply(context.Background(), now, pl, st); len(res) != 2 {
		t.Fatalf("apply: %+v", res)
	}
	return e, p, st, slices.Clone(e.Specs)
}

// specNamed returns the document with this ID.
func specNamed(docs []spec.Document, id string) spec.Document {
	for _, d := range docs {
		if d.Head().ID() == id {
			return d
		}
	}
	return nil
}

// TestHeldReleaseIsPlannedAgainWhateverTheFocus: a release held while a
// spec file did not load is made by a later plan that focuses on other,
// live specs only (as watch's reconciles do), not only by the one the
// removal triggered.
func TestHeldReleaseIsPlannedAgainWhateverTheFocus(t *testing.T) {
	e, p, st, all := twoToys(t)
	ctx := context.Background()
	e.Specs = []spec.Document{specNamed(all, "Toy/shop/floor2")}
	e.Incomplete = true
	pl := e.Plan(ctx, at(p, 11*time.Minute), st, nil)
	if len(pl.Held) != 1 || !pl.Held[0].Release {
		t.Fatalf("held while a file does not load:\n%s", text(pl))
	}
	e.Incomplete = false
	pl = e.Plan(ctx, at(p, 12*time.Minute), st, []string{"Toy/shop/floor2"})
	if c := find(pl.Changes, "spec.replicas"); c == nil || !c.Release || c.Address.Name != "plain1" {
		t.Fatalf("the held release, planned again under another spec's focus:\n%s", text(pl))
	}
}

// TestConfirmedDeletionUndone: a confirmation whose spec came back before
// its release confirms nothing: deleted again later, the spec counts as
// gone for the guard.
func TestConfirmedDeletionUndone(t *testing.T) {
	e, p, st, all := twoToys(t)
	ctx := context.Background()
	e.Specs = []spec.Document{specNamed(all, "Toy/shop/floor2")}
	e.Incomplete = true // the release waits
	e.ConfirmGone = map[string]bool{"Toy/shop/floor1": true}
	e.Plan(ctx, at(p, 11*time.Minute), st, nil)
	replicas1 := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "plain1"}, Path: addrs.MustPath("spec.replicas")}
	// The confirmation is not taken while files do not load.
	if en, _ := st.Lookup(replicas1); en == nil || en.ReleaseConfirmed {
		t.Fatalf("confirmed while files do not load: %+v", en)
	}
	e.Incomplete = false
	e.Plan(ctx, at(p, 11*time.Minute), st, []string{"Toy/shop/floor2"})
	if en, _ := st.Lookup(replicas1); en == nil || (en.Applied != nil && !en.ReleaseConfirmed) {
		t.Fatalf("the confirmation was taken: %+v", en)
	}
	// floor1 comes back (its value is still there: nothing to apply).
	e.Specs = all
	e.Plan(ctx, at(p, 12*time.Minute), st, []string{"Toy/shop/floor2"})
	if en, _ := st.Lookup(replicas1); en == nil || en.ReleaseConfirmed {
		t.Fatalf("a confirmed deletion that was undone still holds: %+v", en)
	}
	if got := engine.Gone(st, map[string]bool{"Toy/shop/floor2": true}); !slices.Equal(got, []string{"Toy/shop/floor1"}) {
		t.Fatalf("deleted again: gone %v, want floor1", got)
	}
}

// TestSharedAttributeIsNotGone: a deleted spec whose attribute a live one
// still sets is not counted gone (nothing of it is released, and no
// confirmation could clear it).
func TestSharedAttributeIsNotGone(t *testing.T) {
	e, p := world(t, plainWL, nfr("plain", ""), toyDoc("8"))
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	e.Apply(ctx, now, pl, st)
	if got := engine.Gone(st, map[string]bool{"NFR/shop/plain": true}); len(got) != 0 {
		t.Fatalf("the Toy shares its attribute with the live NFR: gone %v, want none", got)
	}
}

// TestCreatedObjectComesBack: an attribute of an object setpoint created
// has no user value; released and its spec back, setpoint's own value is
// recorded as its write, never adopted as the user's.
func TestCreatedObjectComesBack(t *testing.T) {
	e, p := world(t, plainWL, nfr("plain", "  autoscaler: {create: true, maxReplicas: 10}\n"))
	all := slices.Clone(e.Specs)
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	e.Apply(ctx, now, pl, st)
	minR := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "plain"}, Path: addrs.MustPath("spec.minReplicas")}
	en, _ := st.Lookup(minR)
	if en == nil || en.Applied == nil || en.User != nil {
		t.Fatalf("created: %+v\n%s", en, text(pl))
	}
	wrote := en.Applied.Value
	e.Specs = nil
	e.ConfirmGone = map[string]bool{"NFR/shop/plain": true}
	now = now.Add(time.Minute)
	pl = e.Plan(ctx, now, st, nil)
	e.Apply(ctx, now, pl, st)
	if en, _ := st.Lookup(minR); en == nil || en.Released == nil || en.Released.User != nil {
		t.Fatalf("released: %+v\n%s", en, text(pl))
	}
	e.Specs = all
	now = now.Add(time.Minute)
	pl = e.Plan(ctx, now, st, nil)
	en, _ = st.Lookup(minR)
	if en == nil || en.User != nil || en.Applied == nil || en.Applied.Value != wrote {
		t.Fatalf("back: user %v applied %+v; want no user value and setpoint's %s as its write\n%s", en.User, en.Applied, wrote, text(pl))
	}
	if !strings.Contains(text(pl), "setpoint's own write on an object it created") {
		t.Fatalf("the plan must say so:\n%s", text(pl))
	}
}

// unreadable fails every Read of an object as the kubernetes provider
// does on a 403 or a timeout: a placeholder that does not exist, beside an
// error naming it.
type unreadable struct{ *sim.Provider }

func (unreadable) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	var resp providers.ReadResponse
	for _, a := range req.Addresses {
		resp.Objects = append(resp.Objects, providers.Object{Address: a})
		resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: providers.Error, Address: &a, Message: "forbidden"})
	}
	return resp
}

// TestReleaseOfAGoneObject: a released field whose object no longer exists
// (its namespace deleted) has nothing to hand back: no release is planned
// or held, a note says so, and the state forgets the field. An object
// that cannot be read is not taken for gone: its release stays (held by
// the guard here, as before).
func TestReleaseOfAGoneObject(t *testing.T) {
	e, p := world(t, plainWL, nfr("plain", ""))
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	replicas := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "plain"}, Path: addrs.MustPath("spec.replicas")}
	pl := e.Plan(ctx, now, st, nil)
	if res := e.Apply(ctx, now, pl, st); len(res) == 0 || res[0].Err != "" {
		t.Fatalf("apply: %+v\n%s", res, text(pl))
	}
	if _, ok := st.Lookup(replicas); !ok {
		t.Fatal("nothing applied to release")
	}
	e.Specs = nil

	e.Providers["sim"] = unreadable{p}
	pl = e.Plan(ctx, now.Add(time.Minute), st, nil)
	if h := find(pl.Held, "spec.replicas"); h == nil || !h.Release {
		t.Fatalf("an unreadable object was taken for gone:\n%s", text(pl))
	}
	if _, ok := st.Lookup(replicas); !ok {
		t.Fatal("the state forgot a field whose object could not be read")
	}

	e.Providers["sim"] = altered{p, func(objs []providers.Object) {
		for i := range objs {
			if objs[i].Address == replicas.Object {
				objs[i] = providers.Object{Address: objs[i].Address}
			}
		}
	}}
	pl = e.Plan(ctx, now.Add(time.Minute), st, nil)
	if find(pl.Changes, "spec.replicas") != nil || find(pl.Held, "spec.replicas") != nil {
		t.Fatalf("a release planned for a gone object:\n%s", text(pl))
	}
	found := slices.ContainsFunc(pl.Notes, func(n plan.Note) bool {
		return n.Spec == "NFR/shop/plain" && strings.Contains(n.Message, "the object is gone, so there is nothing to release")
	})
	if _, ok := st.Lookup(replicas); ok || !found {
		t.Fatalf("want a note and the field forgotten (noted %v):\n%s", found, text(pl))
	}
}

// TestStaleCopyHoldsRelease: a process whose copy of the spec directory is
// not newer than a field's last apply (by more than the copy's lag) holds
// the release of a spec missing from it, which may simply not have reached
// it, and releases once its copy is newer; another replica's releases are
// not planned.
func TestStaleCopyHoldsRelease(t *testing.T) {
	e, p := world(t, plainWL+strings.ReplaceAll(plainWL, "plain", "other"), nfr("plain", ""), nfr("other", ""))
	ctx := context.Background()
	st := state.New()
	now := at(p, 10*time.Minute)
	pl := e.Plan(ctx, now, st, nil)
	if res := e.Apply(ctx, now, pl, st); len(res) != 2 || res[0].Err != "" || res[1].Err != "" {
		t.Fatalf("apply: %+v\n%s", res, text(pl))
	}
	replicas := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "plain"}, Path: addrs.MustPath("spec.replicas")}
	if en, ok := st.Lookup(replicas); !ok || en.Applied == nil || !en.Applied.At.Equal(now) {
		t.Fatalf("state: %+v", en)
	}
	e.Specs = slices.DeleteFunc(e.Specs, func(d spec.Document) bool { return d.Head().ID() == "NFR/shop/plain" })
	for _, c := range []struct {
		name     string
		view     *engine.DirView
		releases func(string) bool
		released bool
	}{
		{"no view: the directory is the source", nil, nil, true},
		{"a copy as of the apply", &engine.DirView{At: now}, nil, false},
		{"a copy newer by the default lag only", &engine.DirView{At: now.Add(engine.DefaultCopyLag)}, nil, false},
		{"a copy newer by more than the default lag", &engine.DirView{At: now.Add(engine.DefaultCopyLag + time.Millisecond)}, nil, true},
		{"a copy newer by its own lag only", &engine.DirView{At: now.Add(time.Minute), Lag: time.Minute}, nil, false},
		{"a copy newer by more than its own lag", &engine.DirView{At: now.Add(time.Minute + time.Millisecond), Lag: time.Minute}, nil, true},
		{"another replica's release", nil, func(id string) bool { return id != "NFR/shop/plain" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.View, e.Releases = c.view, c.releases
			pl := e.Plan(ctx, now.Add(time.Minute), st, nil)
			through, held := releases(pl)
			switch {
			case c.released && (len(through) != 1 || len(held) != 0 || through[0].Address != replicas.Object):
				t.Fatalf("want plain's replicas released:\n%s", text(pl))
			case !c.released && c.releases != nil && len(through)+len(held) != 0:
				t.Fatalf("another replica's release planned:\n%s", text(pl))
			case !c.released && c.releases == nil && (len(through) != 0 || len(held) != 1 || held[0].Held.Kind != plan.HoldRelease || !strings.Contains(held[0].Held.String(), "may not have reached it yet")):
				t.Fatalf("want the release held for the copy's age:\n%s", text(pl))
			}
		})
	}
}
