package nri

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
)

// TestReadCarriesTheOwnershipMark: what the agent holds is reported under
// the field manager it was applied as (setpoint for a cache that kept
// none), so the engine recognises a policy or a limit it created when an
// apply was cut off before it was recorded, instead of adopting it.
func TestReadCarriesTheOwnershipMark(t *testing.T) {
	pol := addrs.Object{Provider: "nri", Kind: noderes.Kind, Namespace: "default", Name: "p"}
	mem := addrs.Object{Provider: "nri", Kind: noderes.MemoryKind, Namespace: "shop", Name: "checkout"}
	for _, c := range []struct{ kept, want string }{{"", "setpoint"}, {"setpoint", "setpoint"}, {"other", "other"}} {
		snap := Snapshot{
			Policy: &PolicyState{Address: pol.String(), Manager: c.kept},
			Memory: map[string]map[string]int64{"shop/checkout": {"app": 256 << 20}},
		}
		if o := Observed(pol, snap); !o.Exists || o.Managers[noderes.AttrConfig] != c.want {
			t.Fatalf("kept %q: the policy's config is managed by %q, want %q", c.kept, o.Managers[noderes.AttrConfig], c.want)
		}
		if o := Observed(mem, snap); !o.Exists || o.Managers[noderes.MemoryAttr("app")] != "setpoint" {
			t.Fatalf("the memory limit's manager: %+v", o.Managers)
		}
	}
	// What check keeps of an apply is the manager it was applied as.
	v, err := values.StructuredOf([]byte(`{"cpus":"enforce","memory":"observe","pools":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	ps, _, err := check(providers.ObjectChange{Address: pol, Manager: "setpoint", Attributes: map[addrs.Path]values.Value{noderes.AttrConfig: v}})
	if err != nil || ps.Manager != "setpoint" {
		t.Fatalf("check: %+v %v", ps, err)
	}
}

// TestStartChecksThePluginIndex: the agent's Start refuses a plugin index
// that is not two digits, as Configure does.
func TestStartChecksThePluginIndex(t *testing.T) {
	for _, idx := range []string{"abc", "5", "500", "x0"} {
		p := &Provider{}
		if err := p.Start(Config{PluginIdx: idx, Socket: "/nonexistent/nri.sock", Cache: t.TempDir() + "/c.json", Topology: "1x2x1"}); err == nil || !strings.Contains(err.Error(), "pluginIdx") {
			t.Errorf("pluginIdx %q: %v, want refused", idx, err)
		}
	}
}

// The key a node reports on at once: the topology and the pools' CPUs,
// not how many containers a pool holds.
func TestSummaryKey(t *testing.T) {
	obj := func(topology, pools string) providers.Object {
		v, err := values.StructuredOf([]byte(pools))
		if err != nil {
			t.Fatal(err)
		}
		return providers.Object{Exists: true, Attributes: map[addrs.Path]values.Value{noderes.AttrTopology: values.StringOf(topology), noderes.AttrPools: v}}
	}
	base := SummaryKey(obj("1 socket, 2 CPUs", `[{"name":"pinned","cpus":"1","containers":["a"]},{"name":"default","cpus":"0"}]`))
	if want := "1 socket, 2 CPUs pinned=1 default=0"; base != want {
		t.Fatalf("key %q, want %q", base, want)
	}
	if k := SummaryKey(obj("1 socket, 2 CPUs", `[{"name":"pinned","cpus":"1","containers":["a","b"]},{"name":"default","cpus":"0"}]`)); k != base {
		t.Errorf("a container more changed the key: %q", k)
	}
	if k := SummaryKey(obj("1 socket, 2 CPUs", `[{"name":"pinned","cpus":"0-1"},{"name":"default","cpus":""}]`)); k == base {
		t.Errorf("the pools' CPUs moved and the key did not: %q", k)
	}
}
