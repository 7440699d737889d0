package sim

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// unchanged fails unless two reads of an object agree on everything.
func unchanged(t *testing.T, before, after providers.Object) {
	t.Helper()
	if before.Generation != after.Generation || !maps.Equal(before.Attributes, after.Attributes) || !maps.Equal(before.Managers, after.Managers) {
		t.Errorf("the object changed:\nbefore %d %v %v\nafter  %d %v %v", before.Generation, before.Attributes, before.Managers,
			after.Generation, after.Attributes, after.Managers)
	}
}

// TestGroupedApplyIsAllOrNothing: one bad attribute refuses the whole
// object change, and nothing of it is set.
func TestGroupedApplyIsAllOrNothing(t *testing.T) {
	wl := deployment("checkout", 2)
	wl.HPA = &spec.SimHPA{Min: 2, Max: 10}
	r := newRig(t, constTrace(100, 600), wl)
	d, h := addr("Deployment", "checkout"), addr("HorizontalPodAutoscaler", "checkout")
	req := ContainerAttr("app", "requests")
	for name, c := range map[string]struct {
		change providers.ObjectChange
		want   string
	}{
		"unknown container":         {change(d, "setpoint", true, req, mib(300), ContainerAttr("nope", "limits"), mib(1)), `no such container "nope"`},
		"unknown path":              {change(d, "setpoint", true, req, mib(300), addrs.MustPath("spec.paused"), count(1)), "spec.paused: Deployment has no such attribute"},
		"status":                    {change(d, "setpoint", true, req, mib(300), AttrReadyReplicas, count(9)), "status is written by controllers"},
		"wrong type":                {change(d, "setpoint", true, req, mib(300), AttrReplicas, mib(3)), "want a count, got the bytes"},
		"negative":                  {change(d, "setpoint", true, req, mib(300), AttrReplicas, count(-1)), "-1 is negative"},
		"no value":                  {change(d, "setpoint", true, req, mib(300), AttrReplicas, values.Value{}), "spec.replicas: no value"},
		"cpu is not served":         {change(d, "setpoint", true, req, mib(300), addrs.MustPath("spec.template.spec.containers[name=app].resources.requests.cpu"), values.MillicoresOf(500)), "no such attribute"},
		"min-scale on a Deployment": {change(d, "setpoint", true, req, mib(300), AttrMinScale, count(1)), "only a KnativeService has it"},
		"minReplicas 0":             {change(h, "setpoint", true, AttrMaxReplicas, count(20), AttrMinReplicas, count(0)), "must be at least 1"},
		"max below min":             {change(h, "setpoint", true, AttrMaxReplicas, count(20), AttrMinReplicas, count(30)), "spec.maxReplicas: 20 is below spec.minReplicas 30"},
		"max below min, one moved":  {change(h, "setpoint", true, AttrMinReplicas, count(11)), "is below"},
		"changed without a value": {providers.ObjectChange{Address: d, Action: action.Update, Manager: "setpoint", Force: true,
			Attributes: attrs(req, mib(300)), Changed: []addrs.Path{req, AttrReplicas}}, "marked changed but the change has no value"},
		"unknown action": {providers.ObjectChange{Address: d, Action: action.Action(9), Manager: "setpoint", Attributes: attrs(req, mib(300))}, "unknown action"},
	} {
		before := r.read(t, c.change.Address.Kind, "checkout", 30)
		res := r.apply(t, 30, c.change)[0]
		if !strings.Contains(res.Err, c.want) || res.After != nil {
			t.Errorf("%s: got %q (after %v), want an error containing %q", name, res.Err, res.After, c.want)
		}
		unchanged(t, before, r.read(t, c.change.Address.Kind, "checkout", 30))
	}
	if len(r.w.changes) != 0 {
		t.Errorf("refused changes were recorded: %+v", r.w.changes)
	}
	// The same change without its bad attribute goes through whole.
	res := r.apply(t, 30, change(d, "setpoint", true, req, mib(300), AttrReplicas, count(3)))[0]
	if res.Err != "" || !maps.Equal(res.After, attrs(req, mib(300), AttrReplicas, count(3))) {
		t.Fatalf("%+v", res)
	}
	after := r.read(t, "Deployment", "checkout", 30)
	if after.Attributes[req] != mib(300) || after.Attributes[AttrReplicas] != count(3) || after.Managers[req] != "setpoint" || after.Managers[AttrReplicas] != "setpoint" {
		t.Errorf("after: %v %v", after.Attributes, after.Managers)
	}
	// One object change is one generation and one rollout.
	if after.Generation != 2 || r.w.wls[0].template.templateGen != 1 {
		t.Errorf("generation %d, template generation %d", after.Generation, r.w.wls[0].template.templateGen)
	}
}

// TestMemoryRequestAboveLimit: a request may not exceed its limit once the
// change is made; a request and limit raised together are judged together.
func TestMemoryRequestAboveLimit(t *testing.T) {
	r := newRig(t, constTrace(100, 600), deployment("api", 2)) // 256Mi / 512Mi
	d := addr("Deployment", "api")
	req, lim := ContainerAttr("app", "requests"), ContainerAttr("app", "limits")
	for _, c := range []providers.ObjectChange{
		change(d, "setpoint", true, req, mib(600)),
		change(d, "setpoint", true, lim, mib(128)),
		change(d, "setpoint", true, req, mib(600), lim, mib(590)),
	} {
		before := r.read(t, "Deployment", "api", 10)
		res := r.apply(t, 10, c)[0]
		if !strings.Contains(res.Err, "spec.template.spec.containers[name=app]: memory request") || !strings.Contains(res.Err, "would exceed the limit") {
			t.Errorf("%v: %q", c.Attributes, res.Err)
		}
		unchanged(t, before, r.read(t, "Deployment", "api", 10))
	}
	if res := r.apply(t, 10, change(d, "setpoint", true, req, mib(600), lim, mib(1024)))[0]; res.Err != "" {
		t.Fatalf("request and limit raised together: %q", res.Err)
	}
	o := r.read(t, "Deployment", "api", 10)
	if o.Attributes[req] != mib(600) || o.Attributes[lim] != mib(1024) {
		t.Errorf("%v", o.Attributes)
	}
	// Equal is allowed; the limit alone may come down to the request.
	if res := r.apply(t, 10, change(d, "setpoint", true, lim, mib(600)))[0]; res.Err != "" {
		t.Fatalf("limit down to the request: %q", res.Err)
	}
	if v := r.value(t, `max(kube_pod_container_resource_limits{resource="memory"})`, 60); v != float64(600<<20) {
		t.Errorf("limits metric %v", v)
	}
}

// TestKnativeScaleBounds: min-scale above a max-scale is refused.
func TestKnativeScaleBounds(t *testing.T) {
	wl := deployment("fib", 0)
	wl.Kind = "KnativeService"
	wl.Knative = &spec.SimKnative{MinScale: 1, MaxScale: 4, TargetConcurrency: 1}
	r := newRig(t, constTrace(10, 600), wl)
	k := addr("KnativeService", "fib")
	if res := r.apply(t, 10, change(k, "setpoint", true, AttrMinScale, count(5)))[0]; !strings.Contains(res.Err, "max-scale\"]: 4 is below") {
		t.Errorf("%q", res.Err)
	}
	if res := r.apply(t, 10, change(k, "setpoint", true, AttrMinScale, count(5), AttrMaxScale, count(0)))[0]; res.Err != "" {
		t.Errorf("max-scale 0 is no bound: %q", res.Err)
	}
	// A config that breaks the rule does not block other changes.
	wl.Knative = &spec.SimKnative{MinScale: 5, MaxScale: 4, TargetConcurrency: 1}
	r = newRig(t, constTrace(10, 600), wl)
	if res := r.apply(t, 10, change(k, "setpoint", true, ContainerAttr("app", "requests"), mib(300)))[0]; res.Err != "" {
		t.Errorf("%q", res.Err)
	}
}

// TestPlanChangeChangesNothing: a dry run reports what Apply would do and
// leaves the world, its managers and its state file as they were.
func TestPlanChangeChangesNothing(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim.json")
	wl := deployment("checkout", 2)
	wl.HPA = &spec.SimHPA{Min: 2, Max: 10}
	r := newRig(t, constTrace(100, 600), wl, deployment("inventory", 1))
	r.p.StatePath = state
	d, h := addr("Deployment", "checkout"), addr("HorizontalPodAutoscaler", "checkout")
	hNew := addr("HorizontalPodAutoscaler", "inventory")
	req := ContainerAttr("app", "requests")
	objs := func() []providers.Object {
		return r.p.Read(context.Background(), providers.ReadRequest{Now: r.at(40), Addresses: []providers.Address{d, h, hNew}}).Objects
	}
	before := objs()
	create := providers.ObjectChange{Address: hNew, Action: action.Create, Attributes: attrs(AttrMinReplicas, count(1), AttrMaxReplicas, count(4)),
		Changed: []addrs.Path{AttrMinReplicas, AttrMaxReplicas}, Manager: "setpoint"}
	// Only min moves; max is kubectl's and stays as it is.
	hpa := change(h, "setpoint", true, AttrMinReplicas, count(4))
	hpa.Attributes[AttrMaxReplicas] = count(8)
	resp := r.p.PlanChange(context.Background(), providers.PlanChangeRequest{Now: r.at(40), Changes: []providers.ObjectChange{
		change(d, "setpoint", true, req, mib(384)),
		change(d, "setpoint", false, req, mib(384)),
		change(d, "setpoint", true, req, mib(1024)),
		create,
		hpa,
	}})
	if len(resp.Results) != 5 || len(resp.Diagnostics) != 0 {
		t.Fatalf("%+v", resp)
	}
	rs := resp.Results
	if rs[0].Err != "" || rs[0].After[req] != mib(384) || rs[0].Address != d {
		t.Errorf("valid change: %+v", rs[0])
	}
	if len(rs[1].Conflicts) != 1 || rs[1].Conflicts[0] != (providers.Conflict{Path: req, Manager: DefaultManager}) || rs[1].After != nil {
		t.Errorf("conflict: %+v", rs[1])
	}
	if !strings.Contains(rs[2].Err, "would exceed the limit") {
		t.Errorf("request above limit: %+v", rs[2])
	}
	if rs[3].Err != "" || !maps.Equal(rs[3].After, create.Attributes) {
		t.Errorf("create: %+v", rs[3])
	}
	if rs[4].Err != "" || !maps.Equal(rs[4].After, attrs(AttrMinReplicas, count(4), AttrMaxReplicas, count(10))) {
		t.Errorf("hpa: %+v", rs[4])
	}
	after := objs()
	for i := range before {
		unchanged(t, before[i], after[i])
	}
	if after[2].Exists {
		t.Error("a dry run created the HPA")
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote the state file: %v", err)
	}
	// Apply does what the dry run said.
	for i, res := range r.apply(t, 40, change(d, "setpoint", true, req, mib(384)), change(d, "setpoint", true, req, mib(1024)), create, hpa) {
		want := rs[[]int{0, 2, 3, 4}[i]]
		if res.Err != want.Err || !maps.Equal(res.After, want.After) {
			t.Errorf("apply %d: %+v, planned %+v", i, res, want)
		}
	}
}

// TestList: by kind, namespace and label selector, in address order.
func TestList(t *testing.T) {
	a, b, c := deployment("b-api", 1), deployment("a-api", 1), deployment("c-fn", 0)
	b.Namespace = "web"
	c.Kind = "KnativeService"
	a.HPA = &spec.SimHPA{Min: 1, Max: 3}
	wls := []spec.SimWorkload{a, b, c}
	for _, n := range []string{"z", "m", "q", "d", "k"} {
		x := deployment("x-"+n, 1)
		x.Namespace = "other"
		wls = append(wls, x)
	}
	r := newRig(t, constTrace(10, 600), wls...)
	list := func(kind, ns string, sel map[string]string) []string {
		resp := r.p.List(context.Background(), providers.ListRequest{Now: r.at(10), Provider: "sim", Kind: kind, Namespace: ns, Selector: sel})
		if len(resp.Diagnostics) > 0 {
			t.Fatal(resp.Diagnostics)
		}
		var out []string
		for _, o := range resp.Objects {
			if !o.Exists || o.Labels["app"] != o.Address.Name || len(o.Attributes) == 0 {
				t.Errorf("%+v", o)
			}
			out = append(out, o.Address.String())
		}
		return out
	}
	for _, c := range []struct {
		kind, ns string
		sel      map[string]string
		want     []string
	}{
		{"Deployment", "", nil, []string{"sim:Deployment/other/x-d", "sim:Deployment/other/x-k", "sim:Deployment/other/x-m",
			"sim:Deployment/other/x-q", "sim:Deployment/other/x-z", "sim:Deployment/shop/b-api", "sim:Deployment/web/a-api"}},
		{"Deployment", "other", nil, []string{"sim:Deployment/other/x-d", "sim:Deployment/other/x-k", "sim:Deployment/other/x-m",
			"sim:Deployment/other/x-q", "sim:Deployment/other/x-z"}},
		{"Deployment", "web", nil, []string{"sim:Deployment/web/a-api"}},
		{"Deployment", "", map[string]string{"app": "b-api"}, []string{"sim:Deployment/shop/b-api"}},
		{"Deployment", "web", map[string]string{"app": "b-api"}, nil},
		{"Deployment", "", map[string]string{"app": "b-api", "tier": "x"}, nil},
		{"Deployment", "", map[string]string{"app": "nope"}, nil},
		{"KnativeService", "", nil, []string{"sim:KnativeService/shop/c-fn"}},
		{"HorizontalPodAutoscaler", "", map[string]string{}, []string{"sim:HorizontalPodAutoscaler/shop/b-api"}},
		{"Pod", "", nil, nil},
	} {
		if got := list(c.kind, c.ns, c.sel); !slices.Equal(got, c.want) {
			t.Errorf("%s %q %v: %v, want %v", c.kind, c.ns, c.sel, got, c.want)
		}
	}
	if resp := r.p.List(context.Background(), providers.ListRequest{Now: r.at(10)}); len(resp.Diagnostics) != 1 {
		t.Errorf("a List without a kind: %+v", resp)
	}
}

// TestConflicts: a changed field another manager owns is refused without
// Force, naming the field and its manager; Force takes it, and then it is
// setpoint's. Unchanged fields another manager owns are never taken.
func TestConflicts(t *testing.T) {
	wl := deployment("checkout", 2)
	wl.HPA = &spec.SimHPA{Min: 2, Max: 10}
	wl.Managers = map[string]string{"spec.maxReplicas": "argocd-controller"}
	r := newRig(t, constTrace(100, 600), wl)
	d, h := addr("Deployment", "checkout"), addr("HorizontalPodAutoscaler", "checkout")

	before := r.read(t, "HorizontalPodAutoscaler", "checkout", 20)
	res := r.apply(t, 20, change(h, "setpoint", false, AttrMinReplicas, count(3), AttrMaxReplicas, count(12)))[0]
	want := []providers.Conflict{{Path: AttrMaxReplicas, Manager: "argocd-controller"}, {Path: AttrMinReplicas, Manager: DefaultManager}}
	if !slices.Equal(res.Conflicts, want) || !strings.Contains(res.Err, "spec.maxReplicas is owned by argocd-controller") ||
		!strings.Contains(res.Err, "spec.minReplicas is owned by "+DefaultManager) {
		t.Fatalf("%+v", res)
	}
	unchanged(t, before, r.read(t, "HorizontalPodAutoscaler", "checkout", 20))
	// The HPA owns a Deployment's replicas.
	if res := r.apply(t, 20, change(d, "setpoint", false, AttrReplicas, count(4)))[0]; len(res.Conflicts) != 1 || res.Conflicts[0].Manager != HPAManager {
		t.Errorf("%+v", res)
	}

	// Force takes the changed field only: max stays argocd's, at its value.
	forced := change(h, "setpoint", true, AttrMinReplicas, count(3))
	forced.Attributes[AttrMaxReplicas] = count(12)
	res = r.apply(t, 20, forced)[0]
	if res.Err != "" || len(res.Conflicts) != 0 || !maps.Equal(res.After, attrs(AttrMinReplicas, count(3), AttrMaxReplicas, count(10))) {
		t.Fatalf("%+v", res)
	}
	o := r.read(t, "HorizontalPodAutoscaler", "checkout", 20)
	if o.Managers[AttrMinReplicas] != "setpoint" || o.Managers[AttrMaxReplicas] != "argocd-controller" || o.Attributes[AttrMaxReplicas] != count(10) {
		t.Errorf("%v %v", o.Attributes, o.Managers)
	}
	// setpoint owns min now: no Force needed, and an unchanged field it
	// owns is re-applied with it.
	res = r.apply(t, 20, change(h, "setpoint", false, AttrMinReplicas, count(4)))[0]
	if res.Err != "" {
		t.Fatalf("%+v", res)
	}
	again := providers.ObjectChange{Address: h, Action: action.Update, Manager: "setpoint",
		Attributes: attrs(AttrMinReplicas, count(5), AttrMaxReplicas, count(12)), Changed: []addrs.Path{AttrMaxReplicas}}
	if res := r.apply(t, 20, again)[0]; len(res.Conflicts) != 1 || res.Conflicts[0].Path != AttrMaxReplicas {
		t.Errorf("%+v", res)
	}
	again.Changed, again.Attributes[AttrMaxReplicas] = nil, count(10)
	if res := r.apply(t, 20, again)[0]; res.Err != "" || res.After[AttrMinReplicas] != count(5) {
		t.Errorf("%+v", res)
	}
}

// TestHPACreateAndDelete: setpoint creates an HPA for a Deployment that
// has none and may delete what it created, nothing else; a replay of the
// state file reproduces all of it.
func TestHPACreateAndDelete(t *testing.T) {
	state := filepath.Join(t.TempDir(), "sim.json")
	wls := []spec.SimWorkload{deployment("api", 2), deployment("inventory", 2)}
	wls[1].HPA = &spec.SimHPA{Min: 1, Max: 4}
	// 200 req/s for 250 s, then 150.
	tr := &Trace{Start: simStart, Rate: append(constTrace(200, 250).Rate, constTrace(150, 650).Rate...)}
	r := newRig(t, tr, wls...)
	r.p.StatePath = state
	h := addr("HorizontalPodAutoscaler", "api")
	create := func(manager string, kv ...any) providers.ObjectChange {
		c := change(h, manager, false, kv...)
		c.Action = action.Create
		return c
	}
	del := func(a providers.Address, manager string) providers.ObjectChange {
		return providers.ObjectChange{Address: a, Action: action.Delete, Manager: manager}
	}
	for _, c := range []struct {
		change providers.ObjectChange
		want   string
	}{
		{create("setpoint", AttrMinReplicas, count(2)), "an HPA needs spec.minReplicas and spec.maxReplicas"},
		{create("setpoint", AttrMinReplicas, count(5), AttrMaxReplicas, count(3)), "is below"},
		{create("setpoint", AttrMinReplicas, count(2), AttrMaxReplicas, count(20), AttrReplicas, count(3)), "HorizontalPodAutoscaler has no such attribute"},
		{providers.ObjectChange{Address: addr("Deployment", "new"), Action: action.Create, Manager: "setpoint"}, "creates only HorizontalPodAutoscalers"},
		{providers.ObjectChange{Address: addr("HorizontalPodAutoscaler", "ghost"), Action: action.Create, Manager: "setpoint"}, "no Deployment shop/ghost"},
		{del(addr("Deployment", "api"), "setpoint"), "does not delete a Deployment"},
		{del(addr("HorizontalPodAutoscaler", "inventory"), "setpoint"), "comes from the sim config"},
	} {
		if res := r.apply(t, 300, c.change)[0]; !strings.Contains(res.Err, c.want) {
			t.Errorf("%v: %q, want %q", c.change, res.Err, c.want)
		}
	}
	if o := r.read(t, "HorizontalPodAutoscaler", "api", 300); o.Exists {
		t.Fatal("a refused create made an HPA")
	}
	// 300 s of traffic went by without an HPA; its first syncs see only
	// what came after it: 150 req/s on 2 pods is 94% of the 80% target,
	// inside the tolerance, so 2 pods stay. (The average since the start,
	// 192 req/s, would make 3; the sum since the start over 15 s, 76.)
	res := r.apply(t, 300, create("setpoint", AttrMinReplicas, count(2), AttrMaxReplicas, count(20)))[0]
	if res.Err != "" || !maps.Equal(res.After, attrs(AttrMinReplicas, count(2), AttrMaxReplicas, count(20))) {
		t.Fatalf("%+v", res)
	}
	o := r.read(t, "HorizontalPodAutoscaler", "api", 301)
	if !o.Exists || o.Generation != 1 || o.Managers[AttrMinReplicas] != "setpoint" || o.Labels["app"] != "api" {
		t.Fatalf("%+v", o)
	}
	for _, sec := range []int{301, 316, 340} {
		if d := r.read(t, "Deployment", "api", sec); d.Attributes[AttrReplicas] != count(2) || d.Managers[AttrReplicas] != HPAManager {
			t.Errorf("at %d s: replicas %v by %s", sec, d.Attributes[AttrReplicas], d.Managers[AttrReplicas])
		}
	}
	// Creating it again is an update of the one there.
	if res := r.apply(t, 340, create("setpoint", AttrMinReplicas, count(3), AttrMaxReplicas, count(20)))[0]; res.Err != "" {
		t.Fatal(res.Err)
	}
	if o := r.read(t, "HorizontalPodAutoscaler", "api", 340); o.Generation != 2 || o.Attributes[AttrMinReplicas] != count(3) {
		t.Fatalf("%+v", o)
	}
	if res := r.apply(t, 360, del(h, "someone-else"))[0]; !strings.Contains(res.Err, "created by setpoint, not someone-else") {
		t.Errorf("%q", res.Err)
	}
	if res := r.apply(t, 360, del(h, "setpoint"))[0]; res.Err != "" {
		t.Fatal(res.Err)
	}
	if res := r.apply(t, 360, del(h, "setpoint"))[0]; res.Err != "" {
		t.Fatalf("deleting what is gone: %q", res.Err)
	}
	if o := r.read(t, "HorizontalPodAutoscaler", "api", 400); o.Exists {
		t.Fatal("not deleted")
	}
	if d := r.read(t, "Deployment", "api", 400); d.Attributes[AttrReplicas] != count(3) || d.Attributes[AttrReadyReplicas] != count(3) {
		t.Errorf("the Deployment keeps what the HPA left: %v", d.Attributes)
	}
	changes, err := LoadChanges(state)
	if err != nil || len(changes) != 3 {
		t.Fatalf("%d changes recorded, want create, update, delete: %v", len(changes), err)
	}
	as := []providers.Address{h, addr("Deployment", "api"), addr("HorizontalPodAutoscaler", "inventory")}
	live := r.p.Read(context.Background(), providers.ReadRequest{Now: r.at(400), Addresses: as}).Objects
	for i, o := range replay(t, state, tr, r.at(400), wls, as...) {
		sameObject(t, live[i], o)
	}
	if wls[0].HPA != nil {
		t.Error("creating an HPA changed the caller's config")
	}
}

// TestStateFileVersions: a version 1 file (before typed values) is an
// error that says to delete it; a corrupt one is an error.
func TestStateFileVersions(t *testing.T) {
	dir := t.TempDir()
	v1 := filepath.Join(dir, "v1.json")
	os.WriteFile(v1, []byte(`{"version":1,"changes":[{"at":1,"address":"Deployment/shop/api","attribute":"spec.replicas","value":"3","manager":"setpoint"}]}`), 0o644)
	if _, err := LoadChanges(v1); err == nil || !strings.Contains(err.Error(), "version 1") || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("v1: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version":3,"changes":[{"at":1,"address":"sim:Deployment/shop/api","attributes":{"spec.replicas":{"type":"count","value":"x"}}}]}`), 0o644)
	if _, err := LoadChanges(bad); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("bad value: %v", err)
	}
	if cs, err := LoadChanges(filepath.Join(dir, "none.json")); err != nil || cs != nil {
		t.Errorf("missing: %v %v", cs, err)
	}
	// What is written reads back, typed.
	good := filepath.Join(dir, "sub", "good.json")
	in := []Change{{At: 5, Address: addr("Deployment", "api"), Action: action.Update, Manager: "setpoint", Force: true,
		Attributes: attrs(AttrReplicas, count(3), ContainerAttr("app", "limits"), mib(512)), Changed: []addrs.Path{AttrReplicas}}}
	if err := saveChanges(good, in); err != nil {
		t.Fatal(err)
	}
	out, err := LoadChanges(good)
	if err != nil || len(out) != 1 || !maps.Equal(out[0].Attributes, in[0].Attributes) || out[0].Address != in[0].Address ||
		!slices.Equal(out[0].Changed, in[0].Changed) || out[0].Action != action.Update || !out[0].Force {
		t.Errorf("%+v %v", out, err)
	}
	raw, _ := os.ReadFile(good)
	var probe struct{ Version int }
	if json.Unmarshal(raw, &probe); probe.Version != 3 {
		t.Errorf("version %d", probe.Version)
	}
}

// TestSchemaTypes: every attribute is typed.
func TestSchemaTypes(t *testing.T) {
	s, diags := NewPlugin().Schema(context.Background())
	if len(diags) > 0 || len(s.Kinds) != 5 {
		t.Fatalf("%+v %v", s, diags)
	}
	types := map[string]values.Type{}
	for _, k := range s.Kinds {
		for _, a := range k.Attributes {
			types[k.Kind+" "+a.Path.String()] = a.Type
		}
	}
	for key, want := range map[string]values.Type{
		"Deployment spec.replicas":        values.Count,
		"Deployment status.readyReplicas": values.Count,
		"Deployment spec.template.spec.containers[name=NAME].resources.requests.memory":          values.Bytes,
		"KnativeService spec.template.spec.containers[name=NAME].resources.limits.memory":        values.Bytes,
		`KnativeService spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`: values.Count,
		"HorizontalPodAutoscaler spec.minReplicas":                                               values.Count,
		"HorizontalPodAutoscaler status.desiredReplicas":                                         values.Count,
		"RouteGroup config":       values.Structured,
		"RouteGroup status.field": values.Structured,
	} {
		if types[key] != want {
			t.Errorf("%s: %v, want %v", key, types[key], want)
		}
	}
	for key, typ := range types {
		if typ == values.Invalid {
			t.Errorf("%s is untyped", key)
		}
	}
}

// TestPluginNotConfigured: every call answers, with a diagnostic.
func TestPluginNotConfigured(t *testing.T) {
	p := NewPlugin()
	ctx := context.Background()
	c := []providers.ObjectChange{change(addr("Deployment", "api"), "setpoint", false, AttrReplicas, count(1))}
	if r := p.Apply(ctx, providers.ApplyRequest{Changes: c}); len(r.Diagnostics) != 1 || len(r.Results) != 1 || r.Results[0].Err == "" {
		t.Errorf("%+v", r)
	}
	if r := p.PlanChange(ctx, providers.PlanChangeRequest{Changes: c}); len(r.Diagnostics) != 1 || len(r.Results) != 1 || r.Results[0].Err == "" {
		t.Errorf("%+v", r)
	}
	if r := p.List(ctx, providers.ListRequest{Kind: "Deployment"}); len(r.Diagnostics) != 1 {
		t.Errorf("%+v", r)
	}
}

// TestConfiguredManagersMustParse: a managers key is an attribute path.
func TestConfiguredManagersMustParse(t *testing.T) {
	wl := deployment("api", 1)
	wl.Managers = map[string]string{"spec..replicas": "argocd-controller"}
	if _, err := NewWithTrace(spec.SimConfig{Workloads: []spec.SimWorkload{wl}}, constTrace(1, 10), Options{}); err == nil || !strings.Contains(err.Error(), "managers") {
		t.Errorf("%v", err)
	}
}
