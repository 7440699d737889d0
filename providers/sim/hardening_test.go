package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// endless is a reader that never ends: /dev/zero without its NULs.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// budget fails a reader once more than n bytes were read from it, so a
// reader that keeps reading an endless input fails the test instead of
// the machine.
type budget struct {
	r io.Reader
	n int
}

var errBudget = errors.New("read past the test's budget: the reader does not bound its input")

func (b *budget) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errBudget
	}
	if len(p) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= n
	return n, err
}

// TestTraceBounds: what a trace expands to is bounded, and every bound is
// an error saying which one, never an allocation the size of the input's
// claims.
func TestTraceBounds(t *testing.T) {
	for name, c := range map[string]struct {
		src  io.Reader
		o    TraceOptions
		want string
	}{
		// 100 years as one rate a second would be 25 GB.
		"arrivals a century apart": {strings.NewReader("TIMESTAMP\n1923-11-16 18:15:46\n2023-11-16 18:15:46\n"), TraceOptions{},
			"line 3: arrival 876600h0m0s after the first: a trace may span at most 31 days"},
		"arrivals past a set bound": {strings.NewReader("TIMESTAMP\n2023-11-16 18:00:00\n2023-11-16 18:01:01\n"), TraceOptions{MaxDuration: time.Minute},
			"line 3: arrival 1m1s after the first: a trace may span at most 1m0s"},
		"a rate trace past a set bound": {strings.NewReader("rate\n1\n2\n3\n"), TraceOptions{MaxDuration: 2 * time.Second},
			"line 4: a rate trace has one row a second and may span at most 2s"},
		"too many rows": {strings.NewReader("TIMESTAMP\n2023-11-16 18:00:00\n2023-11-16 18:00:00\n2023-11-16 18:00:01\n"), TraceOptions{MaxRows: 2},
			"line 4: more than 2 rows"},
		"an endless line": {&budget{r: endless('7'), n: 8 << 20}, TraceOptions{},
			"line 1: longer than 65536 bytes"},
		"an endless second line": {&budget{r: io.MultiReader(strings.NewReader("rate\n"), endless('7')), n: 8 << 20}, TraceOptions{MaxLineBytes: 100},
			"line 2: longer than 100 bytes"},
		"a rate scaled to infinity": {strings.NewReader("rate\n1e308\n"), TraceOptions{RateScale: 1e6},
			"line 2: rate 1e+308 × rateScale 1e+06 is not finite"},
		"rateScale above the schema's": {strings.NewReader("rate\n1\n"), TraceOptions{RateScale: 1e9}, "rateScale must be in (0, 1e6], got 1e+09"},
		"rateScale negative":           {strings.NewReader("rate\n1\n"), TraceOptions{RateScale: -3}, "rateScale must be in (0, 1e6], got -3"},
		"rateScale NaN":                {strings.NewReader("rate\n1\n"), TraceOptions{RateScale: nan()}, "rateScale must be in (0, 1e6], got NaN"},
		"thin NaN":                     {strings.NewReader("rate\n1\n"), TraceOptions{Thin: nan()}, "thin must be in (0, 1], got NaN"},
	} {
		_, err := readTrace(c.src, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("%s: a %d-byte error", name, len(err.Error()))
		}
	}
	// The bounds are inclusive: a trace of exactly the maximum loads.
	tr, err := readTrace(strings.NewReader("TIMESTAMP\n2023-11-16 18:00:00\n2023-11-16 18:00:59.9\n"), TraceOptions{MaxDuration: time.Minute, MaxRows: 2})
	if err != nil || len(tr.Rate) != 60 {
		t.Fatalf("a trace at the bounds: %v", err)
	}
}

func nan() float64 { var z float64; return z / z }

// TestTraceMustBeARegularFile: a device, a FIFO or a directory is refused
// before it is read.
func TestTraceMustBeARegularFile(t *testing.T) {
	for _, p := range []string{"/dev/zero", t.TempDir()} {
		_, err := LoadTrace(p, TraceOptions{})
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestPodsPerWorkloadAreBounded: a Knative service with no max-scale under
// a flood stops at MaxPodsPerWorkload; so does an HPA whose maxReplicas is
// beyond it; a config or a change asking for more pods than that is
// refused, saying why.
func TestPodsPerWorkloadAreBounded(t *testing.T) {
	kn := deployment("fib", 0)
	kn.Kind = "KnativeService"
	kn.Startup = spec.Duration(time.Second)
	kn.Knative = &spec.SimKnative{TargetConcurrency: 1}
	// Without a bound its pods multiply at every sync: the backlog of a
	// flood is ten seconds of whatever capacity it has. (No metrics: their
	// cost is not what is tested.)
	flood := func(tr *Trace, wl spec.SimWorkload) *World {
		t.Helper()
		w, err := NewWithTrace(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{wl}}, tr, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// The world simulates each request, so a flood is bounded too: at most
	// MaxArrivalsPerSecond.
	if _, err := NewWithTrace(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{kn}}, constTrace(MaxArrivalsPerSecond+1, 10), Options{}); err == nil ||
		!strings.Contains(err.Error(), "at most 100000 a second per workload") {
		t.Errorf("a trace beyond the per-second bound: %v", err)
	}
	w := flood(constTrace(0.9*MaxArrivalsPerSecond, 120), kn)
	peak := 0
	for s := 1; s <= 120; s++ {
		w.AdvanceTo(simStart.Add(time.Duration(s) * time.Second))
		peak = max(peak, len(w.wls[0].pods))
		if len(w.wls[0].pods) > MaxPodsPerWorkload {
			t.Fatalf("at %d s: %d pods", s, len(w.wls[0].pods))
		}
	}
	if peak != MaxPodsPerWorkload {
		t.Errorf("peak %d pods: the flood should reach the bound", peak)
	}

	d := deployment("api", 1)
	d.HPA = &spec.SimHPA{Min: 1, Max: 1 << 40, TargetRPS: 1}
	w = flood(constTrace(3e4, 240), d)
	w.AdvanceTo(simStart.Add(240 * time.Second))
	if n := len(w.wls[0].pods); n > MaxPodsPerWorkload || n < MaxPodsPerWorkload/2 {
		t.Errorf("an HPA with maxReplicas 2^40 under a flood: %d pods", n)
	}

	for name, wl := range map[string]spec.SimWorkload{
		"replicas": func() spec.SimWorkload { w := deployment("api", MaxPodsPerWorkload+1); return w }(),
		"hpa.min":  func() spec.SimWorkload { w := deployment("api", 1); w.HPA = &spec.SimHPA{Min: 1e6, Max: 1e6}; return w }(),
		"knative.minScale": func() spec.SimWorkload {
			w := deployment("api", 0)
			w.Kind, w.Knative = "KnativeService", &spec.SimKnative{MinScale: 1e9}
			return w
		}(),
	} {
		_, err := NewWithTrace(spec.SimConfig{Workloads: []spec.SimWorkload{wl}}, constTrace(1, 10), Options{})
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "at most 10000 pods per workload") {
			t.Errorf("%s: %v", name, err)
		}
	}

	d = deployment("api", 1)
	d.HPA = &spec.SimHPA{Min: 1, Max: 4}
	r := newRig(t, constTrace(1, 60), deployment("inventory", 1), d, kn)
	for _, c := range []providers.ObjectChange{
		change(addr("Deployment", "inventory"), "setpoint", true, AttrReplicas, count(MaxPodsPerWorkload+1)),
		change(addr("HorizontalPodAutoscaler", "api"), "setpoint", true, AttrMinReplicas, count(1<<40), AttrMaxReplicas, count(1<<41)),
		change(addr("KnativeService", "fib"), "setpoint", true, AttrMinScale, count(1<<62)),
	} {
		if res := r.apply(t, 10, c)[0]; !strings.Contains(res.Err, "the sim world runs at most 10000 pods per workload") {
			t.Errorf("%v: %q", c.Attributes, res.Err)
		}
	}
	if res := r.apply(t, 10, change(addr("Deployment", "inventory"), "setpoint", true, AttrReplicas, count(MaxPodsPerWorkload)))[0]; res.Err != "" {
		t.Errorf("the bound itself: %q", res.Err)
	}
}

// simFile writes a sim state file whose body is changes (as JSON) with a
// correct checksum, and returns its path.
func simFile(t *testing.T, dir, name, changes string) string {
	t.Helper()
	// Changes that do not decode get a checksum of nothing: the loader
	// must find what is wrong with them before it gets to the checksum.
	sum := "00"
	var cs []Change
	if json.Unmarshal([]byte(changes), &cs) == nil {
		var err error
		if sum, err = checksum(cs); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, name)
	body := `{"version":3,"checksum":"` + sum + `","changes":` + changes + `}`
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSimStateIsChecked: a sim state file is sealed with a checksum and
// every change in it is checked on load; each fault is an error naming
// the file and what is wrong.
func TestSimStateIsChecked(t *testing.T) {
	dir := t.TempDir()
	good := `{"at":5,"address":"sim:Deployment/shop/api","action":"update","attributes":{"spec.replicas":{"type":"count","value":"3"}},"changed":["spec.replicas"],"manager":"setpoint"}`
	p := simFile(t, dir, "good.json", "["+good+"]")
	cs, err := LoadChanges(p)
	if err != nil || len(cs) != 1 || cs[0].At != 5 || cs[0].Attributes[AttrReplicas] != count(3) {
		t.Fatalf("%+v %v", cs, err)
	}
	// A hand edit that keeps the JSON valid breaks the seal.
	b, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(b), `"value":"3"`, `"value":"30"`, 1)), 0o644)
	if _, err := LoadChanges(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("edited: %v", err)
	}
	noSum := filepath.Join(dir, "nosum.json")
	os.WriteFile(noSum, []byte(`{"version":3,"changes":[`+good+`]}`), 0o644)
	if _, err := LoadChanges(noSum); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("no checksum: %v", err)
	}
	v2 := filepath.Join(dir, "v2.json")
	os.WriteFile(v2, []byte(`{"version":2,"changes":[`+good+`]}`), 0o644)
	if _, err := LoadChanges(v2); err == nil || !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("v2: %v", err)
	}

	with := func(old, new string) string { return strings.Replace(good, old, new, 1) }
	for name, c := range map[string]struct{ changes, want string }{
		"unknown action":      {"[" + with(`"update"`, `"explode"`) + "]", `unknown action "explode"`},
		"no action":           {"[" + with(`"action":"update",`, ``) + "]", "change 1: no action"},
		"bad address":         {"[" + with(`sim:Deployment/shop/api`, `sim:Deployment`) + "]", "change 1"},
		"cluster-scoped":      {"[" + with(`sim:Deployment/shop/api`, `sim:Deployment/api`) + "]", `change 1: sim:Deployment/api: the sim world's objects are namespaced`},
		"unknown kind":        {"[" + with(`Deployment`, `Pod`) + "]", `change 1: sim:Pod/shop/api: the sim world has no kind Pod`},
		"null value":          {"[" + with(`{"type":"count","value":"3"}`, `null`) + "]", "change 1: spec.replicas: no value"},
		"negative value":      {"[" + with(`"3"`, `"-3"`) + "]", "change 1: spec.replicas: -3 is negative"},
		"bad value":           {"[" + with(`"3"`, `"x"`) + "]", `change 1: spec.replicas: "x" is not a count`},
		"changed, no value":   {"[" + with(`["spec.replicas"]`, `["spec.minReplicas"]`) + "]", "change 1: spec.minReplicas is marked changed but has no value"},
		"no manager":          {"[" + with(`"setpoint"`, `""`) + "]", "change 1: no manager"},
		"negative time":       {"[" + with(`"at":5`, `"at":-1`) + "]", "change 1: at -1 s"},
		"time past any trace": {"[" + with(`"at":5`, `"at":99999999999`) + "]", "change 1: at 99999999999 s is past the longest trace"},
		"time goes back":      {"[" + good + "," + with(`"at":5`, `"at":4`) + "]", "change 2: at 4 s is before the change before it (5 s)"},
	} {
		p := simFile(t, dir, strings.ReplaceAll(name, " ", "-")+".json", c.changes)
		if _, err := LoadChanges(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming the file and %q", name, err, c.want)
		}
	}

	// A change after the end of the world's trace is refused when the world
	// is built from it, saying where the trace ends.
	late := simFile(t, dir, "late.json", "["+with(`"at":5`, `"at":700`)+"]")
	changes, err := LoadChanges(late)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewWithTrace(spec.SimConfig{Workloads: []spec.SimWorkload{deployment("api", 1)}}, constTrace(1, 600), Options{Changes: changes})
	if err == nil || !strings.Contains(err.Error(), "change 1 at 700 s is after the end of the trace (600 s)") {
		t.Errorf("late change: %v", err)
	}
	// And the world takes no change after its trace's end, so it never
	// writes one.
	r := newRig(t, constTrace(1, 600), deployment("api", 1))
	if res := r.apply(t, 600, change(addr("Deployment", "api"), "setpoint", true, AttrReplicas, count(2)))[0]; res.Err != "" {
		t.Errorf("a change at the end: %q", res.Err)
	}
	if res := r.apply(t, 601, change(addr("Deployment", "api"), "setpoint", true, AttrReplicas, count(3)))[0]; !strings.Contains(res.Err, "the trace ended at 2023-11-16T18:10:00Z (10m0s from its start): the sim world takes no changes after it") {
		t.Errorf("a change after the end: %q", res.Err)
	}
	if r := r.p.PlanChange(context.Background(), providers.PlanChangeRequest{Now: r.at(601), Changes: []providers.ObjectChange{change(addr("Deployment", "api"), "setpoint", true, AttrReplicas, count(3))}}); !strings.Contains(r.Results[0].Err, "the trace ended") {
		t.Errorf("a dry run after the end: %+v", r)
	}
}

// twoProviders opens two providers on one state file, as two provider
// processes of two setpoint runs would.
func twoProviders(t *testing.T, state string, tr *Trace, wls ...spec.SimWorkload) (*Provider, *Provider) {
	t.Helper()
	open := func() *Provider {
		p, err := NewProvider(spec.SimConfig{Seed: 1, Workloads: wls}, tr, state, Options{Sink: embedded.NewStore(0)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return open(), open()
}

// TestProvidersShareTheStateFile: two providers on one state file, each
// loaded before the other applied, see each other's changes before every
// request, never apply one twice, and never drop one from the file.
func TestProvidersShareTheStateFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim-state.json")
	hpa := deployment("checkout", 2)
	hpa.HPA = &spec.SimHPA{Min: 2, Max: 10}
	a, b := twoProviders(t, state, constTrace(100, 900), hpa, deployment("inventory", 1))
	ctx := context.Background()
	at := func(sec int) time.Time { return simStart.Add(time.Duration(sec) * time.Second) }
	h, inv := addr("HorizontalPodAutoscaler", "checkout"), addr("Deployment", "inventory")
	minUp := change(h, "setpoint", true, AttrMinReplicas, count(3))
	read := func(p *Provider, a providers.Address, sec int) providers.Object {
		t.Helper()
		r := p.Read(ctx, providers.ReadRequest{Now: at(sec), Addresses: []providers.Address{a}})
		if len(r.Diagnostics) > 0 {
			t.Fatal(r.Diagnostics)
		}
		return r.Objects[0]
	}
	// Both are at 600 s, as two one-shot applies are.
	read(a, h, 600)
	read(b, h, 600)
	if r := a.Apply(ctx, providers.ApplyRequest{Now: at(600), Changes: []providers.ObjectChange{minUp}}); r.Results[0].Err != "" || len(r.Diagnostics) > 0 {
		t.Fatalf("%+v", r)
	}
	if o := read(b, h, 600); o.Attributes[AttrMinReplicas] != count(3) || o.Managers[AttrMinReplicas] != "setpoint" || o.Generation != 2 {
		t.Fatalf("b does not see a's change: %v %v gen %d", o.Attributes, o.Managers, o.Generation)
	}
	// b's dry run and apply of the same change find nothing to do.
	if r := b.PlanChange(ctx, providers.PlanChangeRequest{Now: at(600), Changes: []providers.ObjectChange{minUp}}); r.Results[0].Err != "" {
		t.Fatalf("%+v", r)
	}
	if r := b.Apply(ctx, providers.ApplyRequest{Now: at(600), Changes: []providers.ObjectChange{minUp}}); r.Results[0].Err != "" {
		t.Fatalf("%+v", r)
	}
	cs, err := LoadChanges(state)
	if err != nil || len(cs) != 1 {
		t.Fatalf("the change was recorded %d times: %v", len(cs), err)
	}
	// b applies another; a sees both, and the file keeps both.
	if r := b.Apply(ctx, providers.ApplyRequest{Now: at(600), Changes: []providers.ObjectChange{change(inv, "setpoint", true, AttrReplicas, count(3))}}); r.Results[0].Err != "" {
		t.Fatalf("%+v", r)
	}
	if o := read(a, inv, 700); o.Attributes[AttrReplicas] != count(3) || o.Attributes[AttrReadyReplicas] != count(3) {
		t.Fatalf("a does not see b's change: %v", o.Attributes)
	}
	if cs, err := LoadChanges(state); err != nil || len(cs) != 2 {
		t.Fatalf("%d changes in the file, want 2: %v", len(cs), err)
	}
	// A change at an earlier time than a's world (a watch ahead of a
	// one-shot apply) rebuilds a's world: it is the world a fresh provider
	// builds from the file, to the metric.
	if r := b.Apply(ctx, providers.ApplyRequest{Now: at(650), Changes: []providers.ObjectChange{change(inv, "setpoint", true, ContainerAttr("app", "requests"), mib(300))}}); r.Results[0].Err != "" {
		t.Fatalf("%+v", r)
	}
	fresh, err := NewProvider(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{hpa, deployment("inventory", 1)}}, constTrace(100, 900), state, Options{Sink: embedded.NewStore(0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []providers.Address{h, inv, addr("Deployment", "checkout")} {
		sameAs(t, read(a, addr, 800), read(fresh, addr, 800))
		sameAs(t, read(b, addr, 800), read(fresh, addr, 800))
	}
	ta, _ := a.World.Totals("shop", "inventory")
	tf, _ := fresh.World.Totals("shop", "inventory")
	if ta != tf {
		t.Errorf("totals: rebuilt %+v, fresh %+v", ta, tf)
	}
	// A change from a world behind the others goes before the changes
	// due later, so the file stays in time order, and a world ahead of it
	// is rebuilt with it.
	if r := a.Apply(ctx, providers.ApplyRequest{Now: at(850), Changes: []providers.ObjectChange{change(inv, "setpoint", true, AttrReplicas, count(2))}}); r.Results[0].Err != "" {
		t.Fatalf("%+v", r)
	}
	if r := fresh.Apply(ctx, providers.ApplyRequest{Now: at(820), Changes: []providers.ObjectChange{change(h, "setpoint", true, AttrMinReplicas, count(4))}}); r.Results[0].Err != "" {
		t.Fatalf("%+v", r)
	}
	cs, err = LoadChanges(state)
	var ats []int
	for _, c := range cs {
		ats = append(ats, c.At)
	}
	if err != nil || !slices.Equal(ats, []int{600, 600, 650, 820, 850}) {
		t.Fatalf("the file should hold the changes in time order: %v %v", ats, err)
	}
	again, err := NewProvider(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{hpa, deployment("inventory", 1)}}, constTrace(100, 900), state, Options{Sink: embedded.NewStore(0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []providers.Address{h, inv, addr("Deployment", "checkout")} {
		want := read(again, addr, 900)
		for _, p := range []*Provider{a, b, fresh} {
			sameAs(t, read(p, addr, 900), want)
		}
	}
	if o := read(a, h, 900); o.Attributes[AttrMinReplicas] != count(4) {
		t.Errorf("a lost fresh's change: %v", o.Attributes)
	}
}

func sameAs(t *testing.T, got, want providers.Object) {
	t.Helper()
	if got.Exists != want.Exists || got.Generation != want.Generation || !maps.Equal(got.Attributes, want.Attributes) || !maps.Equal(got.Managers, want.Managers) {
		t.Errorf("%s:\n got  %d %v %v\n want %d %v %v", want.Address, got.Generation, got.Attributes, got.Managers, want.Generation, want.Attributes, want.Managers)
	}
}

// TestSimStateLockSerialisesApplies: Apply holds the sidecar lock around
// reload, apply and save; another process's Apply waits for it.
func TestSimStateLockSerialisesApplies(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim-state.json")
	a, _ := twoProviders(t, state, constTrace(100, 900), deployment("inventory", 1))
	unlock, err := lockState(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	onLockWait = func() { close(waiting) }
	defer func() { onLockWait = nil }()
	done := make(chan providers.ApplyResponse, 1)
	go func() {
		done <- a.Apply(context.Background(), providers.ApplyRequest{Now: simStart.Add(10 * time.Second),
			Changes: []providers.ObjectChange{change(addr("Deployment", "inventory"), "setpoint", true, AttrReplicas, count(2))}})
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("Apply never waited for the lock")
	}
	select {
	case r := <-done:
		t.Fatalf("Apply ran while another held the lock: %+v", r)
	default:
	}
	onLockWait = nil
	unlock()
	select {
	case r := <-done:
		if r.Results[0].Err != "" {
			t.Fatal(r.Results[0].Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Apply did not finish once the lock was free")
	}
	// A cancelled Apply stops waiting and says why.
	unlock, err = lockState(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := a.Apply(ctx, providers.ApplyRequest{Now: simStart.Add(20 * time.Second),
		Changes: []providers.ObjectChange{change(addr("Deployment", "inventory"), "setpoint", true, AttrReplicas, count(3))}})
	if len(r.Diagnostics) == 0 || !strings.Contains(r.Results[0].Err, "sim state lock") {
		t.Fatalf("%+v", r)
	}
}

// TestSimStateFollowsTheFile: a provider follows its state file whatever
// happens to it: rewritten in place within the file system's timestamp
// granularity (same inode, size and time), deleted, or corrupted, which
// is an error until it is right again, the world left as it was.
func TestSimStateFollowsTheFile(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim-state.json")
	inv := addr("Deployment", "inventory")
	write := func(replicas int64) {
		t.Helper()
		b, err := encodeChanges([]Change{changeOf(10, change(inv, "setpoint", true, AttrReplicas, count(replicas)))})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(3)
	p, err := NewProvider(spec.SimConfig{Seed: 1, Workloads: []spec.SimWorkload{deployment("inventory", 1)}}, constTrace(10, 600), state, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	replicas := func(sec int) (values.Value, []providers.Diagnostic) {
		r := p.Read(ctx, providers.ReadRequest{Now: simStart.Add(time.Duration(sec) * time.Second), Addresses: []providers.Address{inv}})
		if len(r.Objects) == 0 {
			return values.Value{}, r.Diagnostics
		}
		return r.Objects[0].Attributes[AttrReplicas], r.Diagnostics
	}
	if v, d := replicas(20); v != count(3) || d != nil {
		t.Fatalf("%v %v", v, d)
	}
	// The same inode, size and modification time, other content.
	fi, _ := os.Stat(state)
	write(4)
	if err := os.Chtimes(state, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(state); !stampOf(fi2).sameStamp(stampOf(fi)) {
		t.Fatal("the rewrite changed the stamp: the test proves nothing")
	}
	if v, _ := replicas(30); v != count(4) {
		t.Fatalf("a rewrite with the same stamp, just after the last read, was missed: %v", v)
	}
	// Deleted: the world of the config alone.
	os.Remove(state)
	if v, d := replicas(40); v != count(1) || d != nil {
		t.Fatalf("deleted: %v %v", v, d)
	}
	// Corrupt: an error naming the file, for reads and applies alike, and
	// the world keeps what it had.
	write(5)
	b, _ := os.ReadFile(state)
	os.WriteFile(state, bytes.Replace(b, []byte(`"value": "5"`), []byte(`"value": "6"`), 1), 0o644)
	if _, d := replicas(50); len(d) != 1 || !strings.Contains(d[0].Error(), state) || !strings.Contains(d[0].Error(), "checksum") {
		t.Fatalf("corrupt: %v", d)
	}
	r := p.Apply(ctx, providers.ApplyRequest{Now: simStart.Add(50 * time.Second), Changes: []providers.ObjectChange{change(inv, "setpoint", true, AttrReplicas, count(2))}})
	if !strings.Contains(r.Results[0].Err, "checksum") {
		t.Fatalf("an apply on a corrupt file: %+v", r)
	}
	if b2, _ := os.ReadFile(state); !bytes.Contains(b2, []byte(`"value": "6"`)) {
		t.Fatal("an apply wrote over a corrupt file")
	}
	write(5)
	if v, d := replicas(60); v != count(5) || d != nil {
		t.Fatalf("repaired: %v %v", v, d)
	}
}

// TestOversizedSimStateIsRefusedUnread: a sim state file over
// MaxStateFile (a sparse file here) is an error, not a read of all of it.
func TestOversizedSimStateIsRefusedUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim-state.json")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 1<<40); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChanges(path); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Fatalf("want the oversized file refused: %v", err)
	}
}
