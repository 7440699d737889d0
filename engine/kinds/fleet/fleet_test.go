package fleetkind

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/fleet"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

// TestInitialNodes: a new cluster starts at the restricted floor, at
// least one rounded step, and never above the restricted ceiling.
func TestInitialNodes(t *testing.T) {
	for _, c := range []struct {
		name                        string
		multiAZ                     bool
		zones, floor, step, ceiling int
		want                        int
	}{
		// The case: max(0, 6) = 6 > 4; the ceiling caps it.
		{"single-AZ step 6 above ceiling 4", false, 3, 0, 6, 4, 4},
		{"single-AZ floor 3, step 2", false, 3, 3, 2, 30, 3},
		// Floor 4 → 6, step 2 → 3, ceiling 13 → 12: 6.
		{"3 zones: the floor rounded up", true, 3, 4, 2, 13, 6},
		// Step 4 → 6 but ceiling 5 → 3: 3.
		{"3 zones: the step rounded up, capped at the ceiling rounded down", true, 3, 0, 4, 5, 3},
		// Floor 3 → 4, step 1 → 4, ceiling 10 → 8: 4.
		{"4 zones", true, 4, 3, 1, 10, 4},
		// Floor 5 → 6, step 3 → 4: 6.
		{"2 zones", true, 2, 5, 3, 30, 6},
		// Zones unset (a spec built in Go): the default 3.
		{"zones 0 is 3", true, 0, 1, 1, 30, 3},
	} {
		var sp spec.FleetSpec
		sp.MultiAZ, sp.Zones = c.multiAZ, c.zones
		sp.Nodes.Floor, sp.Nodes.Step, sp.Nodes.Ceiling = c.floor, c.step, c.ceiling
		if got := initialNodes(sp); got != c.want {
			t.Errorf("%s: %d nodes, want %d", c.name, got, c.want)
		}
	}
}

// TestReporterReady: without a reporter query every reporter is ready;
// with one, a cluster's value of at least 1 is; a query that failed
// leaves the cluster to the hold it causes.
func TestReporterReady(t *testing.T) {
	m := map[string]float64{"one": 1, "two": 2, "zero": 0, "half": 0.5, "nan": math.NaN()}
	for _, c := range []struct {
		expr, name string
		failed     bool
		want       bool
	}{
		{"", "absent", false, true},
		{"q", "one", false, true},
		{"q", "two", false, true},
		{"q", "zero", false, false},
		{"q", "half", false, false},
		{"q", "nan", false, false},
		{"q", "absent", false, false},
		{"q", "absent", true, true},
	} {
		if got := reporterReady(c.expr, m, c.name, c.failed); got != c.want {
			t.Errorf("reporter %q, cluster %s, failed %v: %v, want %v", c.expr, c.name, c.failed, got, c.want)
		}
	}
}

// TestCreatedWithin: the creates this fleet applied in the hour up to
// now, by region, oldest first; another fleet's, another namespace's and
// older ones do not count.
func TestCreatedWithin(t *testing.T) {
	now := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	f := &spec.Fleet{}
	f.Kind, f.Metadata.Name, f.Metadata.Namespace = "Fleet", "streaming", "default"
	st := state.New()
	made := func(ns, name, region, by string, ago time.Duration) {
		o := addrs.Object{Provider: "sim", Kind: cluster.Kind, Namespace: ns, Name: name}
		at := now.Add(-ago)
		st.Entry(addrs.Attr{Object: o, Path: cluster.Template}).Applied = &state.Applied{Value: values.StringOf("standard"), At: at, By: []string{by}}
		st.Entry(addrs.Attr{Object: o, Path: cluster.LabelPath(cluster.LabelRegion)}).Applied = &state.Applied{Value: values.StringOf(region), At: at, By: []string{by}}
	}
	id := f.ID()
	made("default", "e1", "us-east-1", id, 10*time.Minute)
	made("default", "e2", "us-east-1", id, 50*time.Minute)
	made("default", "e0", "us-east-1", id, 61*time.Minute) // over an hour ago
	made("default", "w1", "us-west-2", id, 59*time.Minute) //
	made("default", "x1", "us-east-1", "Fleet/default/other", time.Minute)
	made("other", "o1", "us-east-1", id, time.Minute)
	// A cluster setpoint only resized (no template of its own) is no create.
	st.Entry(addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: cluster.Kind, Namespace: "default", Name: "old"}, Path: cluster.Nodes}).Applied = &state.Applied{Value: values.CountOf(6), At: now, By: []string{id}}
	got := createdWithin(st, f, "sim", now)
	east, west := got["us-east-1"], got["us-west-2"]
	if len(got) != 2 || len(east) != 2 || len(west) != 1 {
		t.Fatalf("%v: want two in us-east-1, one in us-west-2", got)
	}
	if !slices.Equal(east, []time.Time{now.Add(-50 * time.Minute), now.Add(-10 * time.Minute)}) {
		t.Errorf("us-east-1 %v: want 50 and 10 minutes ago, oldest first", east)
	}
}

// TestStatusesNoted: the statuses note read back, by cluster; other notes
// are not it.
func TestStatusesNoted(t *testing.T) {
	n := plan.Note{Severity: diag.Info, Spec: "Fleet/streaming/streaming", Message: "3 clusters: east-a ready, east-b compute_node_scaling_up, east-c full"}
	got, ok := StatusesNoted(n)
	if !ok || len(got) != 3 || got["east-a"] != fleet.Ready || got["east-b"] != fleet.ScalingUp || got["east-c"] != fleet.Full {
		t.Fatalf("%v, %v", got, ok)
	}
	if Short(got["east-a"]) || !Short(got["east-b"]) || !Short(got["east-c"]) || Short(fleet.Provisioning) {
		t.Error("short: scaling up and full only")
	}
	if got, ok := StatusesNoted(plan.Note{Severity: diag.Info, Spec: "Fleet/a/b", Message: "0 clusters: "}); !ok || len(got) != 0 {
		t.Errorf("no cluster: %v, %v", got, ok)
	}
	for _, other := range []plan.Note{
		{Severity: diag.Info, Spec: "Fleet/a/b", Message: "east-a: spare 3 nodes' worth for 2m10s of 5m: held, scale down 12 → 9 at … if it lasts: …"},
		{Severity: diag.Warning, Spec: "Fleet/a/b", Message: "2 clusters: a ready, b ready"},
		{Severity: diag.Info, Spec: "Schedule/a/b", Message: "2 clusters: a ready, b ready"},
	} {
		if got, ok := StatusesNoted(other); ok {
			t.Errorf("%+v: read as %v", other, got)
		}
	}
}

// TestSpareKept: the spare run goes into the node count's state entry
// and comes back; a zero run forgets it, and an entry left with nothing
// goes, while one with more in it stays.
func TestSpareKept(t *testing.T) {
	st := state.New()
	a := addrs.Attr{Object: addrs.Object{Provider: "sim", Kind: cluster.Kind, Namespace: "ns", Name: "east-a"}, Path: cluster.Nodes}
	if r := spareRun(st, a); r != (fleet.SpareRun{}) {
		t.Fatalf("nothing kept: %+v", r)
	}
	at := time.Date(2026, 5, 4, 12, 0, 0, 0, time.FixedZone("x", 3600))
	keepSpare(st, a, fleet.SpareRun{Since: at, Nodes: 12})
	if r := spareRun(st, a); !r.Since.Equal(at) || r.Nodes != 12 {
		t.Fatalf("kept %+v", r)
	}
	keepSpare(st, a, fleet.SpareRun{})
	if e, ok := st.Lookup(a); ok {
		t.Fatalf("forgotten, the entry stays: %+v", e)
	}
	st.Entry(a).User = &values.Value{}
	*st.Entry(a).User = values.CountOf(6)
	keepSpare(st, a, fleet.SpareRun{Since: at, Nodes: 12})
	keepSpare(st, a, fleet.SpareRun{})
	if e, ok := st.Lookup(a); !ok || e.User == nil || len(e.Policy) != 0 {
		t.Fatalf("an entry with a user value: %+v, %v", e, ok)
	}
	st.Entry(a).Policy = map[string]json.RawMessage{spareKey: json.RawMessage(`"not a run"`)}
	if r := spareRun(st, a); r != (fleet.SpareRun{}) {
		t.Fatalf("unreadable: %+v", r)
	}
}
